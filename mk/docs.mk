# Docs as tests (tests/docs/run_docs.py): every code block of README.md,
# docs/*.md and python/README.md runs as written, against a hub started as
# `make run` starts it; the blocks that need hardware, root or QEMU say so and
# are listed.
#
#   make test-docs   build the fieldhub command and the Python wheel, then run
#                    the documents in order (needs 127.0.0.1:29536 free).

.PHONY: test-docs
test-docs: python-env
	$(call need,test-docs,curl cmake cc)
	$(WORKSPACE_BUILD)
	$(PYTHON) tests/docs/run_docs.py --fieldhub $(TEST_BIN) --python $(VENV_PY)

TEST_PARTS += test-docs
