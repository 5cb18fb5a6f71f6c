#!/usr/bin/env python3
"""Docs as tests: run every fenced code block of README.md, docs/*.md and
python/README.md, in order, as a newcomer would type them.

Each document runs in its own scratch directory, which looks like the
repository (its top-level entries are links to the checkout, so `make`,
`cmake -S c` and `pip install ./python` work) and against a fresh hub started
as `make run` starts it: the built-in configuration, on 127.0.0.1:29536 and
shm://default. HOME is a scratch directory too, so nothing is installed into
the real one.

What runs, by the block's language:

- sh: with bash -e; a block fails when a command fails. Background jobs (`&`)
  live until the document ends.
- toml: checked with `fieldhub hub --check-config`, or written to a file the
  later blocks use (directive `file NAME`).
- python: with the Python of a venv that has the fieldhub wheel installed.
- rust: built and run as a program (directive `rust-program`) that depends on
  the client crate as the document's `cargo-toml` block says.
- anything else (c, cmake, json, text, output): not code to run; listed —
  unless it has a `file NAME` directive: then it is written to that file
  (a LIN description file the next blocks use).

A comment right above a block directs it; directives are separated by `;`:

    <!-- doc-test: skip: needs root -->        not run, and listed with the reason
    <!-- doc-test: terminals 2 -->             each line in its own terminal, at once;
                                               those still running after 2 s get
                                               Ctrl-C and must end cleanly
    <!-- doc-test: setup -->                   run again after each fresh-hub
    <!-- doc-test: fresh-hub -->               first end background jobs, start a new
                                               hub, run the setup blocks again
    <!-- doc-test: file bus.toml -->           write the block to this file
    <!-- doc-test: copy SRC DEST -->           first copy SRC (in the checkout) to DEST
    <!-- doc-test: expect TEXT -->             the block's output must contain TEXT
    <!-- doc-test: cargo-toml -->              a Cargo.toml excerpt for the rust-program
    <!-- doc-test: rust-program -->            build and run this rust block
    <!-- doc-test: pytest -->                  run this python block with pytest

Every block of a language that runs (sh, toml, python, rust) runs unless it
says why not. Exit status 0 when every block that runs succeeded.
"""

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

RUNNABLE = {"sh", "bash", "toml", "python", "rust"}
HUB_ADDRESS = ("127.0.0.1", 29536)
BLOCK_TIMEOUT = 600


@dataclass
class Block:
    document: str
    line: int
    language: str
    text: str
    directives: Dict[str, str] = field(default_factory=dict)

    @property
    def where(self) -> str:
        return f"{self.document}:{self.line}"


class DocFailure(Exception):
    """A block that did not do what its document says."""


FENCE = re.compile(r"^```(\S*)[ \t]*\n(.*?)^```[ \t]*$", re.M | re.S)
DIRECTIVE = re.compile(r"<!--\s*doc-test:\s*(.*?)\s*-->\s*$")


def parse_directives(text: str) -> Dict[str, str]:
    directives = {}
    # `skip:` takes the rest of the comment as its reason, `;` included.
    text, _, reason = text.partition("skip:")
    if _:
        directives["skip"] = reason.strip()
    for part in (p.strip() for p in text.split(";")):
        if not part:
            continue
        name, _, value = part.partition(" ")
        directives[name] = value.strip()
    return directives


def blocks_of(path: Path, root: Path) -> List[Block]:
    text = path.read_text()
    blocks = []
    for match in FENCE.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        directive = DIRECTIVE.search(before)
        blocks.append(
            Block(
                document=str(path.relative_to(root)),
                line=line,
                language=match.group(1).lower(),
                text=match.group(2),
                directives=parse_directives(directive.group(1)) if directive else {},
            )
        )
    return blocks


class Hub:
    """The hub the documents assume: `make run`'s, started by the harness."""

    def __init__(self, fieldhub: Path, cwd: Path, env: Dict[str, str]):
        self.ready = cwd / ".hub.ready"
        if self.ready.exists():
            self.ready.unlink()
        self.log = open(cwd / ".hub.log", "w")
        self.process = subprocess.Popen(
            [str(fieldhub), "hub", "--ready-file", str(self.ready)],
            cwd=cwd, env=env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True,
        )
        deadline = time.monotonic() + 60
        while not self.ready.exists():
            if self.process.poll() is not None:
                raise DocFailure(f"the hub did not start:\n{(cwd / '.hub.log').read_text()}")
            if time.monotonic() > deadline:
                raise DocFailure("the hub did not get ready within 60 s")
            time.sleep(0.05)
        self.addresses = json.loads(self.ready.read_text())

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()


def ctrl_c_as_in_a_terminal() -> None:
    """A terminal's command ends on Ctrl-C even when the tests themselves were
    started in the background (`make test &`), whose shell set SIGINT to be
    ignored, a setting every program it starts inherits."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def kill_group(process: subprocess.Popen, sig: int = signal.SIGKILL) -> None:
    try:
        os.killpg(process.pid, sig)
    except ProcessLookupError:
        pass


class Document:
    """One document's run: its scratch directory, hub and background jobs."""

    def __init__(self, runner: "Runner", name: str):
        self.runner = runner
        self.cwd = Path(tempfile.mkdtemp(prefix="doc-", dir=runner.scratch))
        for entry in runner.root.iterdir():
            if entry.name not in (".git",):
                (self.cwd / entry.name).symlink_to(entry)
        # `../fieldhub/...` in a reader's Cargo.toml: the checkout beside
        # the reader's project.
        checkout = self.cwd.parent / "fieldhub"
        if not checkout.exists():
            checkout.symlink_to(runner.root)
        self.env = dict(runner.env)
        self.env["HOME"] = str(self.cwd / "home")
        os.makedirs(self.env["HOME"])
        self.groups: List[subprocess.Popen] = []
        self.setup: List[Block] = []
        self.cargo_toml: Optional[str] = None
        self.hub: Optional[Hub] = None
        self.name = name

    def start_hub(self) -> None:
        self.hub = Hub(self.runner.fieldhub, self.cwd, self.env)

    def end_jobs(self) -> None:
        for process in self.groups:
            kill_group(process)
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                pass
        self.groups.clear()

    def close(self) -> None:
        self.end_jobs()
        if self.hub:
            self.hub.stop()

    def run(self, block: Block) -> str:
        d = block.directives
        if "copy" in d:
            source, destination = d["copy"].split()
            shutil.copy(self.runner.root / source, self.cwd / destination)
        if "fresh-hub" in d:
            self.end_jobs()
            if self.hub:
                self.hub.stop()
            self.start_hub()
            for setup in self.setup:
                self.run_shell(setup)
        if "setup" in d:
            self.setup.append(block)
        language = block.language
        if language not in RUNNABLE:
            (self.cwd / d["file"]).write_text(block.text)
            return ""
        if language in ("sh", "bash"):
            output = self.run_terminals(block) if "terminals" in d else self.run_shell(block)
        elif language == "toml":
            output = self.run_toml(block)
        elif language == "python" and "pytest" in d:
            test_file = self.cwd / f"test_doc_{block.line}.py"
            test_file.write_text(block.text)
            output = self.run_command([self.runner.python, "-m", "pytest", "-q", "-p", "no:cacheprovider", test_file.name], block)
            if " passed" not in output or " failed" in output:
                raise DocFailure(f"pytest did not pass every test:\n{output}")
        elif language == "python":
            output = self.run_command([self.runner.python, "-c", block.text], block)
        elif language == "rust":
            output = self.run_rust(block)
        else:
            raise AssertionError(language)
        if "expect" in d and d["expect"] not in output:
            raise DocFailure(f"the output does not contain {d['expect']!r}:\n{output}")
        return output

    def run_command(self, command: List[str], block: Block) -> str:
        # Output goes to a file, not a pipe: background jobs a block starts
        # keep their output open, and the block ends when its last
        # foreground command does. They stay in the block's process group,
        # which lives until the document ends.
        log = tempfile.TemporaryFile(mode="w+", dir=self.runner.scratch)
        process = subprocess.Popen(
            command, cwd=self.cwd, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
        self.groups.append(process)
        limit = int(block.directives.get("timeout", BLOCK_TIMEOUT))
        try:
            process.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            kill_group(process)
            process.wait()
            log.seek(0)
            raise DocFailure(f"still running after {limit} s:\n{log.read()}")
        log.seek(0)
        output = log.read()
        if process.returncode != 0:
            raise DocFailure(f"exit status {process.returncode}:\n{output}")
        return output

    def run_shell(self, block: Block) -> str:
        return self.run_command(["bash", "-e", "-o", "pipefail", "-c", block.text], block)

    def run_terminals(self, block: Block) -> str:
        seconds = float(block.directives["terminals"] or 2)
        terminals = []
        for line in block.text.splitlines():
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            log = tempfile.TemporaryFile(mode="w+", dir=self.runner.scratch)
            process = subprocess.Popen(
                ["bash", "-e", "-o", "pipefail", "-c", line], cwd=self.cwd, env=self.env, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=ctrl_c_as_in_a_terminal,
            )
            terminals.append((line, process, log))
            time.sleep(0.5)
        time.sleep(seconds)
        outputs, failures = [], []
        for line, process, _ in terminals:
            if process.poll() is None:
                kill_group(process, signal.SIGINT)
        for line, process, log in terminals:
            try:
                status = process.wait(15)
            except subprocess.TimeoutExpired:
                kill_group(process)
                status = process.wait()
                failures.append(f"{line}: did not end on Ctrl-C")
            log.seek(0)
            text = log.read()
            outputs.append(text)
            if status not in (0, -signal.SIGINT, 128 + signal.SIGINT):
                failures.append(f"{line}: exit status {status}:\n{text}")
        if failures:
            raise DocFailure("\n".join(failures))
        return "".join(outputs)

    def run_toml(self, block: Block) -> str:
        if "cargo-toml" in block.directives:
            self.cargo_toml = block.text
            return ""
        name = block.directives.get("file")
        path = self.cwd / name if name else Path(tempfile.mkstemp(suffix=".toml", dir=self.runner.scratch)[1])
        path.write_text(block.text)
        if name and not name.endswith(".toml"):
            return ""
        return self.run_command([str(self.runner.fieldhub), "hub", "--check-config", "--config", str(path)], block)

    def run_rust(self, block: Block) -> str:
        if "rust-program" not in block.directives:
            raise DocFailure("a rust block runs as a program (rust-program) or says why not (skip: …)")
        if self.cargo_toml is None:
            raise DocFailure("a rust-program needs the document's cargo-toml block before it")
        project = self.cwd.parent / f"reader-{block.line}"
        (project / "src").mkdir(parents=True)
        (project / "Cargo.toml").write_text(
            f'[package]\nname = "reader-app"\nversion = "0.1.0"\nedition = "2021"\n\n{self.cargo_toml}\n[workspace]\n'
        )
        (project / "src" / "main.rs").write_text(block.text)
        # The checkout's versions of every dependency, so nothing new is fetched.
        shutil.copy(self.runner.root / "Cargo.lock", project / "Cargo.lock")
        # Under `make test` the program shares the test run's build (its
        # directory and its profile, the release profile made a test build),
        # so the client crate's dependencies are compiled once.
        shared = self.env.get("CARGO_BUILD_TARGET_DIR")
        env = dict(self.env, CARGO_TARGET_DIR=shared or str(self.runner.root / "target" / "doc-tests"))
        process = subprocess.run(
            ["cargo", "run", "--quiet", *(["--release"] if shared else [])], cwd=project, env=env,
            capture_output=True, text=True, timeout=BLOCK_TIMEOUT,
        )
        if process.returncode != 0:
            raise DocFailure(f"cargo run: exit status {process.returncode}:\n{process.stdout}{process.stderr}")
        return process.stdout


class Runner:
    def __init__(self, root: Path, fieldhub: Path, python: str, scratch: Path):
        self.root = root
        self.fieldhub = fieldhub
        self.python = python
        self.scratch = scratch
        env = dict(os.environ)
        # Cargo and rustup keep their homes when HOME moves.
        for var, default in (("CARGO_HOME", ".cargo"), ("RUSTUP_HOME", ".rustup")):
            env.setdefault(var, str(Path.home() / default))
        env.setdefault("PIP_CACHE_DIR", str(Path.home() / ".cache" / "pip"))
        env.pop("FIELDHUB_HUB", None)
        env["FIELDHUB_LOG"] = "warn"
        # The documents' cargo builds (`make install`, `pip install ./python`,
        # `cmake -S c`, the Rust programs) share the build of the test run:
        # `make test` names its directory in CARGO_BUILD_TARGET_DIR.
        env["CARGO_TARGET_DIR"] = env.get("CARGO_TARGET_DIR") or env.get("CARGO_BUILD_TARGET_DIR") or str(root / "target")
        env["CARGO_INSTALL_ROOT"] = str(scratch / "cargo-root")
        # The fieldhub given comes before the venv's: the Python package
        # installs a `fieldhub` script too, built from whatever wheel the
        # venv holds, and the docs are checked against the binary named.
        env["PATH"] = os.pathsep.join(
            [str(scratch / "cargo-root" / "bin"), str(fieldhub.parent), str(Path(python).parent), env["PATH"]]
        )
        self.env = env

    def run(self, documents: List[Path]) -> int:
        not_run, failures, ran = [], [], 0
        for path in documents:
            blocks = blocks_of(path, self.root)
            if not blocks:
                continue
            document = Document(self, str(path.relative_to(self.root)))
            try:
                document.start_hub()
                for block in blocks:
                    reason = self.reason_not_run(block)
                    if reason:
                        not_run.append(f"{block.where} ({block.language or 'text'}): {reason}")
                        continue
                    started = time.monotonic()
                    try:
                        document.run(block)
                        ran += 1
                        print(f"ok    {block.where} ({block.language}, {time.monotonic() - started:.1f} s)", flush=True)
                    except DocFailure as failure:
                        failures.append(block.where)
                        print(f"FAIL  {block.where} ({block.language})\n{block.text}--- what happened:\n{failure}\n",
                              flush=True)
            except DocFailure as failure:
                failures.append(document.name)
                print(f"FAIL  {document.name}: {failure}", flush=True)
            finally:
                document.close()
        print(f"\n{ran} blocks ran, {len(failures)} failed; {len(not_run)} not run:")
        for line in not_run:
            print(f"  {line}")
        if failures:
            print("\nfailed: " + ", ".join(failures))
        return 1 if failures else 0

    @staticmethod
    def reason_not_run(block: Block) -> Optional[str]:
        if "skip" in block.directives:
            if not block.directives["skip"]:
                raise SystemExit(f"{block.where}: `skip:` needs a reason")
            return block.directives["skip"]
        if block.language not in RUNNABLE and "file" not in block.directives:
            return "not code to run"
        return None


def hub_port_is_free() -> bool:
    import socket

    with socket.socket() as s:
        return s.connect_ex(HUB_ADDRESS) != 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[2])
    parser.add_argument("--fieldhub", type=Path, required=True, help="the fieldhub binary the docs' commands use")
    parser.add_argument("--python", required=True, help="a Python with the fieldhub wheel installed")
    parser.add_argument("documents", nargs="*", type=Path, help="default: README.md, docs/*.md, python/README.md")
    args = parser.parse_args()
    root = args.root.resolve()
    documents = [root / d for d in args.documents] or (
        [root / "README.md"] + sorted((root / "docs").glob("*.md")) + [root / "python" / "README.md"]
    )
    if not hub_port_is_free():
        print(f"test-docs: something listens on {HUB_ADDRESS[0]}:{HUB_ADDRESS[1]}, the address the docs use; "
              "stop that hub (make run) first", file=sys.stderr)
        return 1
    scratch = Path(tempfile.mkdtemp(prefix="fieldhub-docs-"))
    try:
        return Runner(root, args.fieldhub.resolve(), args.python, scratch).run(documents)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
