# The benchmark scripts (bench/): run.sh's helpers, not the benchmarks.
#
#   make test-bench   check that bench/silkit.py reads SIL Kit's result line
#                     and bench/median.py's tables, on made-up figures (the
#                     Python standard library only; no benchmark runs).

PYTHON ?= python3

.PHONY: test-bench
test-bench:
	$(PYTHON) -m unittest discover -s bench -p 'test_*.py'

TEST_PARTS += test-bench
