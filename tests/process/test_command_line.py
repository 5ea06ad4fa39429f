"""The command line as a user first meets it. tidemark --help (and tidemark help) lists
every command; for each, COMMAND --help, COMMAND -h and tidemark help COMMAND print the
same text on stdout with exit 0: a usage line and one line for every option (90 columns
at most), and every option shown is one the command accepts. --version prints the version
CMakeLists.txt's project() gives. An unknown command or option is refused with exit 2 and
the usage. tidemark settings (text and --json) lists exactly the settings of the
tidemark.conf that init writes, with the defaults it writes, and a misspelt setting in
--set is refused with exit 2, naming the setting meant, before anything is created."""
import json
import os
import re

from harness import Tidemark, check, finish, parse_args, remove, scratch

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def commands(tm):
    """The command names tidemark --help lists (its "commands:" section)."""
    result = tm.run("--help")
    check(result.returncode == 0, f"tidemark --help exited {result.returncode}")
    names, listing = [], False
    for line in result.stdout.splitlines():
        if line == "commands:":
            listing = True
        elif listing and line.startswith("  "):
            names.append(line.split()[0])
        elif listing:
            break
    return names


def option_lines(help_text):
    """{flag: its line} for the indented option lines of a command's help."""
    found = {}
    for line in help_text.splitlines():
        match = re.match(r"  (-[-\w]+)(, (--\w+))?", line)
        if match:
            found[match.group(1)] = line
            if match.group(3):
                found[match.group(3)] = line
    return found


def check_command_help(tm, name, directory):
    result = tm.run(name, "--help")
    text = result.stdout
    check(result.returncode == 0, f"{name} --help exited {result.returncode}: {result.stderr}")
    check(result.stderr == "", f"{name} --help wrote to stderr: {result.stderr!r}")
    check(text.startswith(f"usage: tidemark {name}"), f"{name} --help: no usage line: {text!r}")
    for other in (["help", name], [name, "-h"]):
        again = tm.run(*other)
        check(again.returncode == 0 and again.stdout == text,
              f"tidemark {' '.join(other)} differs from {name} --help")
    for line in text.splitlines():
        check(len(line) <= 90, f"{name} --help: a line wider than 90 columns: {line!r}")
    usage = text.split("\n\n")[0]
    shown = set(re.findall(r"\[?(-[-\w]+)", usage))
    options = option_lines(text)
    check("--help" in options and "-h" in options, f"{name} --help does not list -h, --help")
    for flag in shown:
        check(flag in options, f"{name} --help: {flag} is in the usage line but has no option line")
    if "[FAULTS]" in usage:
        check("--crash-after-writes" in options, f"{name} --help: FAULTS without the fault flags")
    for flag, line in sorted(options.items()):
        check(len(line.split(None, 2)) >= 2, f"{name} --help: {flag} has no explanation: {line!r}")
        if flag in ("-h", "--help", "-D"):
            continue
        # Every option the help shows is accepted: alone (no -D), each command stops at
        # something other than an unknown option.
        takes_value = len(line.split()) > 1 and re.match(r"[A-Z]", line.split()[1])
        run = tm.run(name, flag, *(["1"] if takes_value else []), cwd=directory)
        check("unknown option" not in run.stderr,
              f"{name} {flag}: listed in --help but refused: {run.stderr.strip()}")
    print(f"{name} --help: {len(options) - 2} options, each with one line", flush=True)


def project_version():
    with open(os.path.join(SOURCE, "CMakeLists.txt")) as f:
        return re.search(r"project\(tidemark VERSION (\S+)", f.read()).group(1)


def conf_settings(path):
    """{key: value} of a tidemark.conf, and the keys marked (init)."""
    values, init = {}, set()
    with open(path) as f:
        for line in f:
            text, _, comment = line.partition("#")
            if not text.strip():
                continue
            key, _, value = text.partition("=")
            values[key.strip()] = value.strip()
            if "(init)" in comment:
                init.add(key.strip())
    return values, init


def check_settings(tm, directory):
    data = os.path.join(directory, "defaults")
    tm.init(data, settings=())
    conf, init = conf_settings(os.path.join(data, "tidemark.conf"))
    check(len(conf) > 20, f"tidemark.conf holds only {sorted(conf)}")

    result = tm.run("settings")
    check(result.returncode == 0, f"settings exited {result.returncode}: {result.stderr}")
    listed = dict(re.findall(r"^(\w+) = (\S+)", result.stdout, re.MULTILINE))
    check(set(listed) == set(conf),
          f"tidemark settings lists {sorted(set(listed) - set(conf))} that tidemark.conf lacks "
          f"and lacks {sorted(set(conf) - set(listed))}")
    for key, value in conf.items():
        check(listed.get(key) == value,
              f"{key}: tidemark settings shows default {listed.get(key)!r}, init wrote {value!r}")

    as_json = tm.run("settings", "--json")
    check(as_json.returncode == 0, f"settings --json exited {as_json.returncode}")
    entries = json.loads(as_json.stdout)
    check([e["name"] for e in entries] == list(conf),
          "settings --json does not list tidemark.conf's keys in its order")
    for e in entries:
        shown = e["default"] if e["default"] else "''"
        check(shown == conf.get(e["name"]), f"{e['name']}: --json default {shown!r}")
        check(e["fixed_at_init"] == (e["name"] in init), f"{e['name']}: fixed_at_init disagrees")
        check(all(e[field] for field in ("type", "allowed", "meaning")),
              f"{e['name']}: an empty field in {e}")
    print(f"settings: {len(listed)} listed, the {len(conf)} of tidemark.conf with its defaults",
          flush=True)

    new = os.path.join(directory, "never-made")
    typo = tm.run("init", "-D", new, "--set", "shared_bufers=64MB")
    check(typo.returncode == 2 and "shared_bufers" in typo.stderr
          and "shared_buffers" in typo.stderr and not os.path.exists(new),
          f"init --set shared_bufers: exit {typo.returncode}: {typo.stderr}")
    unknown = tm.run("bench", "-D", data, "-t", "1", "--set", "no_such_setting=1")
    check(unknown.returncode == 2 and "no_such_setting" in unknown.stderr,
          f"bench --set no_such_setting=1: exit {unknown.returncode}: {unknown.stderr}")
    print(f"unknown setting: exit 2: {typo.stderr.strip()}", flush=True)


def main():
    args = parse_args()
    tm = Tidemark(args.tidemark)
    directory = scratch()
    try:
        names = commands(tm)
        check({"init", "bench", "verify", "recover", "check", "basebackup", "standby",
               "promote"} <= set(names), f"tidemark --help lists {names}")
        help_all = tm.run("help")
        check(help_all.returncode == 0 and help_all.stdout == tm.run("--help").stdout,
              "tidemark help differs from tidemark --help")
        for name in names:
            check_command_help(tm, name, directory)

        version = tm.run("--version")
        check(version.returncode == 0 and version.stdout == f"tidemark {project_version()}\n",
              f"--version printed {version.stdout!r}, expected tidemark {project_version()}")
        print(f"--version: {version.stdout.strip()}")

        bare = tm.run()
        check(bare.returncode == 2 and "commands:" in bare.stderr,
              f"tidemark without a command: exit {bare.returncode}")
        unknown = tm.run("frobnicate")
        check(unknown.returncode == 2 and "frobnicate" in unknown.stderr,
              f"unknown command: exit {unknown.returncode}: {unknown.stderr}")
        flag = tm.run("bench", "-D", directory, "--frobnicate", "1")
        check(flag.returncode == 2 and "--frobnicate" in flag.stderr
              and "usage: tidemark bench" in flag.stderr,
              f"unknown option: exit {flag.returncode}: {flag.stderr}")
        late = tm.run("bench", "-D", directory, "-c", "2", "--help")
        check(late.returncode == 0 and late.stdout.startswith("usage: tidemark bench"),
              f"bench -D DIR -c 2 --help: exit {late.returncode}")
        check_settings(tm, directory)
        missing = tm.run("verify")
        check(missing.returncode == 2 and "-D" in missing.stderr,
              f"verify without -D: exit {missing.returncode}: {missing.stderr}")
    finally:
        remove(directory)
    finish("command line")


if __name__ == "__main__":
    main()
