"""An out-of-tree consumer builds against Tidemark three ways and runs: the installed CMake
package (cmake --install to a temporary prefix, then find_package(Tidemark)), pkg-config
(g++ with `pkg-config --cflags --libs tidemark` against the same prefix), and
add_subdirectory of the source tree (unsanitized builds only). The program run is
examples/embed_minimal.cpp; with pkg-config every example is also compiled and linked,
and a C++20 source (consumer/cxx20_pkg_config.cpp) stays C++20 with pkg-config's flags.
The install holds exactly the public headers (include/tidemark/*.hpp), so the consumers'
include path has nothing else.
When the build installs the tidemark program (TIDEMARK_INSTALLS_TOOL=ON: Tidemark is the
top-level project), PREFIX/bin/tidemark --version runs from the prefix and prints the
version; otherwise nothing is installed in bin/.
find_package(Tidemark) with a dependency missing (a TIDEMARK_*_LIBRARY or _INCLUDE_DIR
cache entry pointing at nothing) must fail naming that dependency, not with a pkg-config or
linker error.
usage: test_consumer.py BUILD_DIR SOURCE_DIR [EXTRA_FLAGS]"""
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile

EXPECTED = "hits=100 misses=10"


def run(command, **kwargs):
    print("+", " ".join(command), flush=True)
    result = subprocess.run(command, capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        print(result.stdout[-4000:], result.stderr[-4000:])
        raise SystemExit(f"FAIL: {' '.join(command)} exited {result.returncode}")
    return result


def configure_fails(label, command, *expected):
    """Runs a configure step that must fail, with every one of `expected` in its output."""
    print("+", " ".join(command), flush=True)
    result = subprocess.run(command, capture_output=True, text=True)
    output = result.stdout + result.stderr
    if result.returncode == 0:
        raise SystemExit(f"FAIL: {label}: configured although a dependency is missing")
    words = " ".join(output.split())  # CMake wraps its messages
    missing = [text for text in expected if " ".join(text.split()) not in words]
    if missing:
        print(output[-4000:])
        raise SystemExit(f"FAIL: {label}: the error does not say {missing}")
    print(f"{label}: refused, naming it", flush=True)


def allow_core_dump():
    resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))


def check_runs(program, scratch, label):
    """Runs a consumer; one that dies of a signal has its threads' stacks printed from its
    core file (gdb, where installed), so a crash seen once can be diagnosed."""
    data = os.path.join(scratch, label + "-data")
    cores = os.path.join(scratch, label + "-cores")
    os.makedirs(cores, exist_ok=True)
    print("+", program, data, flush=True)
    result = subprocess.run([program, data], capture_output=True, text=True, cwd=cores,
                            preexec_fn=allow_core_dump)
    if result.returncode != 0:
        print(result.stdout[-4000:], result.stderr[-4000:])
        for core in os.listdir(cores):
            if shutil.which("gdb"):
                trace = subprocess.run(["gdb", "-batch", "-ex", "thread apply all bt", program,
                                        os.path.join(cores, core)], capture_output=True, text=True)
                print(trace.stdout[-20000:], flush=True)
        raise SystemExit(f"FAIL: {program} {data} exited {result.returncode}")
    output = result.stdout
    if EXPECTED not in output:
        raise SystemExit(f"FAIL: {label}: expected {EXPECTED!r}, got {output!r}")
    print(f"{label}: {output.strip()}", flush=True)


def check_installed_tool(prefix):
    """PREFIX/bin/tidemark runs and prints its version when the build installs it; bin/
    stays empty when it does not."""
    program = os.path.join(prefix, "bin", "tidemark")
    if os.environ.get("TIDEMARK_INSTALLS_TOOL", "OFF").upper() not in ("ON", "1", "TRUE", "YES"):
        if os.path.exists(program):
            raise SystemExit(f"FAIL: {program} was installed by a build that does not install the tool")
        print("install: no tidemark program (this build does not install it)", flush=True)
        return
    if not os.access(program, os.X_OK):
        raise SystemExit(f"FAIL: cmake --install did not install {program}")
    version = run([program, "--version"]).stdout.strip()
    if not re.fullmatch(r"tidemark \d+\.\d+\.\d+", version):
        raise SystemExit(f"FAIL: {program} --version printed {version!r}, expected 'tidemark X.Y.Z'")
    print(f"install: {program} --version: {version}", flush=True)


def main():
    build, source = sys.argv[1], sys.argv[2]
    flags = sys.argv[3] if len(sys.argv) > 3 else ""
    example = os.path.join(source, "examples", "embed_minimal.cpp")
    consumer = os.path.join(source, "tests", "packaging", "consumer")
    scratch = tempfile.mkdtemp(prefix="tidemark-consumer-")
    jobs = str(os.cpu_count() or 2)
    # With sanitizer flags, build as the sanitizer suite does (-O1 -g1: line tables for the
    # reports).
    flag_args = ([f"-DCMAKE_CXX_FLAGS={flags}", f"-DCMAKE_EXE_LINKER_FLAGS={flags}",
                  "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
                  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG"] if flags else [])
    try:
        prefix = os.path.join(scratch, "prefix")
        run(["cmake", "--install", build, "--prefix", prefix])
        installed = sorted(os.path.relpath(os.path.join(root, name), os.path.join(prefix, "include"))
                           for root, _, names in os.walk(os.path.join(prefix, "include"))
                           for name in names)
        public = sorted(os.path.join("tidemark", name)
                        for name in os.listdir(os.path.join(source, "include", "tidemark")))
        if installed != public:
            raise SystemExit(f"FAIL: installed headers {installed}, expected the public ones {public}")
        check_installed_tool(prefix)

        package = os.path.join(scratch, "package")
        run(["cmake", "-S", consumer, "-B", package, f"-DCMAKE_PREFIX_PATH={prefix}",
             f"-DEXAMPLE={example}", *flag_args])
        run(["cmake", "--build", package, "-j", jobs])
        check_runs(os.path.join(package, "consumer"), scratch, "find_package")
        nowhere = os.path.join(scratch, "nowhere")
        for variable, path, missing, needs in (
                ("TIDEMARK_LZ4_LIBRARY", os.path.join(nowhere, "liblz4.so"), "liblz4 not found",
                 "Tidemark needs liblz4 and lz4.h (Debian package liblz4-dev)"),
                ("TIDEMARK_URING_INCLUDE_DIR", nowhere, "liburing.h not found",
                 "Tidemark needs liburing and liburing.h (Debian package liburing-dev)"),
                ("TIDEMARK_CAF_IO_LIBRARY", os.path.join(nowhere, "libcaf_io.so"),
                 "libcaf_io not found",
                 "Tidemark needs libcaf_io and caf/io/all.hpp (Debian package libcaf-dev)")):
            configure_fails(f"find_package with {variable} pointing at nothing",
                            ["cmake", "-S", consumer, "-B", os.path.join(scratch, "no-" + variable),
                             f"-DCMAKE_PREFIX_PATH={prefix}", f"-DEXAMPLE={example}",
                             f"-D{variable}={path}"],
                            'package "Tidemark" is considered to be NOT FOUND', needs,
                            f'{missing} ({variable} is "{path}")')

        pc_dirs = [os.path.join(root, "pkgconfig") for root, dirs, _ in os.walk(prefix)
                   if "pkgconfig" in dirs]
        env = dict(os.environ, PKG_CONFIG_PATH=":".join(pc_dirs))
        pc = run(["pkg-config", "--cflags", "--libs", "tidemark"], env=env).stdout.split()
        examples = sorted(os.path.join(source, "examples", name)
                          for name in os.listdir(os.path.join(source, "examples"))
                          if name.endswith(".cpp"))
        for other in examples:
            program = os.path.join(scratch, "pkg-config-" + os.path.basename(other)[:-4])
            run(["g++", other, "-o", program, *flags.split(), *(["-O1", "-g1"] if flags else []), *pc])
        check_runs(os.path.join(scratch, "pkg-config-embed_minimal"), scratch, "pkg-config")
        cflags = run(["pkg-config", "--cflags", "tidemark"], env=env).stdout.split()
        run(["g++", "-std=c++20", *cflags, "-c", os.path.join(consumer, "cxx20_pkg_config.cpp"),
             "-o", os.path.join(scratch, "cxx20_pkg_config.o")])
        print("pkg-config: a C++20 source stays C++20", flush=True)

        # add_subdirectory compiles the whole library again with the consumer's flags: in a
        # sanitizer build that is minutes for a library the suite already tests sanitized,
        # so only the unsanitized build checks this way in, as a unity build of one batch a
        # library (quicker: 60 s of CPU where batches of 8 sources took 100).
        if flags:
            print("add_subdirectory: checked by the unsanitized build", flush=True)
        else:
            sub = os.path.join(scratch, "subdirectory")
            run(["cmake", "-S", consumer, "-B", sub, f"-DTIDEMARK_SOURCE={source}",
                 f"-DEXAMPLE={example}", "-DTIDEMARK_UNITY_BUILD=ON",
                 "-DTIDEMARK_UNITY_BATCH_SIZE=0"])
            run(["cmake", "--build", sub, "-j", jobs])
            check_runs(os.path.join(sub, "consumer"), scratch, "add_subdirectory")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print("consumer: 1 passed, 0 failed")


if __name__ == "__main__":
    main()
