// doctest's main for the unit, trace and in-process fault tests. A run asked for test cases
// by name (ctest runs each case as `--test-case=NAME`) fails when no test case matches: a
// case whose name ctest cannot pass whole (a ';' splits it) would otherwise pass unrun.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <cstring>

namespace {

unsigned matched_test_cases = 0;

// Listens only for the count of test cases that passed the filters.
struct match_counter final : doctest::IReporter {
  explicit match_counter(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats& stats) override {
    matched_test_cases = stats.numTestCasesPassingFilters;
  }
  void test_case_start(const doctest::TestCaseData&) override {}
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {}
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};

REGISTER_LISTENER("match_counter", 1, match_counter);

bool names_test_cases(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    for (const char* option : {"--test-case=", "-tc=", "--dt-test-case=", "--dt-tc="})
      if (std::strncmp(argv[i], option, std::strlen(option)) == 0)
        return true;
  return false;
}

} // namespace

int main(int argc, char** argv) {
  doctest::Context context(argc, argv);
  int result = context.run();
  if (context.shouldExit())
    return result; // a query (--list-test-cases, --help): nothing ran
  if (result == 0 && names_test_cases(argc, argv) && matched_test_cases == 0) {
    std::fprintf(stderr, "no test case matches the names given\n");
    return 1;
  }
  return result;
}
