"""``python -m fieldhub hub [--config FILE] [--listen ADDR]... [--token-file PATH] [--shm NAME | --no-shm] [--time real|virtual] [--ready-fd N]``:
run a hub in this process until SIGINT/SIGTERM (what :class:`fieldhub.Hub`
starts). The hub is the same Rust hub as the ``fieldhub`` command's.

``--ready-fd N`` works as ``fieldhub hub --ready-fd N`` does: once the hub is
started, one JSON line with its actual addresses goes to that inherited file
descriptor, which is then closed. :class:`fieldhub.Hub` reads it from a pipe
instead of parsing the log.

``--until-stdin-closes`` also stops it when its standard input reaches end of
file: :class:`fieldhub.Hub` gives its private hub a pipe, so the hub goes away
with the Python process that started it even when that process is killed.
"""

import argparse
import json
import os
import signal
import sys
import threading
from typing import Any, Callable, Dict

from fieldhub import _native


def stop_when_stdin_closes() -> None:
    """Read stdin until end of file, then ask the hub to stop as SIGTERM would."""

    def watch() -> None:
        while os.read(sys.stdin.fileno(), 4096):
            pass
        # The hub's signal handler turns this into an orderly shutdown.
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="fieldhub-stdin-watch", daemon=True).start()


def ready_writer(fd: int) -> Callable[[Dict[str, Any]], None]:
    """The hub's ``on_ready``: write its addresses to ``fd`` as one JSON
    line, then close it, so the reader sees end of file right behind it."""

    def write(ready: Dict[str, Any]) -> None:
        try:
            with open(fd, "w", closefd=True) as f:
                f.write(json.dumps(ready) + "\n")
        except OSError as e:
            raise OSError(f"--ready-fd {fd}: cannot write the ready line: {e.strerror}") from None

    return write


def check_ready_fd(parser: argparse.ArgumentParser, fd: int) -> None:
    """Refuse a --ready-fd the hub cannot use before it starts, as ``fieldhub hub`` does."""
    if 0 <= fd <= 2:
        parser.error(f"--ready-fd {fd}: standard input, output and error cannot carry the ready line "
                     "(the hub closes the file descriptor after writing it)")
    try:
        os.fstat(fd)
    except OSError:
        parser.error(f"--ready-fd {fd}: no such open file descriptor (pass the write end of a pipe the hub inherits)")


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m fieldhub")
    commands = parser.add_subparsers(dest="command", required=True)
    hub = commands.add_parser("hub", help="run a hub")
    hub.add_argument("--config", help="TOML configuration file (default: the built-in one)")
    hub.add_argument("--config-origin", help="how errors name the configuration (default: the file name)")
    hub.add_argument("--listen", action="append", default=[], help="HOST:PORT or unix:PATH; repeatable")
    hub.add_argument("--token-file", metavar="PATH",
                     help="file holding the token clients must present, readable only by its owner (default: "
                          "$FIELDHUB_TOKEN, else the file $FIELDHUB_TOKEN_FILE names, else the configuration's)")
    hub.add_argument("--recordings-dir", metavar="DIR",
                     help="the only directory control-API recordings are written in (default: ./recordings)")
    shm = hub.add_mutually_exclusive_group()
    shm.add_argument("--shm", metavar="NAME", help="serve local clients over shared memory as shm://NAME")
    shm.add_argument("--no-shm", action="store_true", help="serve no shared memory, whatever the configuration says")
    hub.add_argument("--time", choices=("real", "virtual"),
                     help="real: the wall clock; virtual: bus time advances with the synchronised participants' steps "
                          "(replaces [hub] time)")
    hub.add_argument("--until-stdin-closes", action="store_true", help="also stop when stdin reaches end of file")
    hub.add_argument("--ready-fd", type=int, metavar="N",
                     help="once started, write one JSON line with the hub's addresses to this inherited file "
                          "descriptor and close it")
    args = parser.parse_args()
    if args.ready_fd is not None:
        check_ready_fd(hub, args.ready_fd)
    text = None
    if args.config:
        try:
            with open(args.config) as f:
                text = f.read()
        except OSError as e:
            print(f"error: cannot read the configuration: {e}", file=sys.stderr)
            return 1
    origin = args.config_origin or args.config or "built-in default configuration"
    if args.until_stdin_closes:
        stop_when_stdin_closes()
    try:
        on_ready = ready_writer(args.ready_fd) if args.ready_fd is not None else None
        _native.run_hub(text, origin, args.listen, args.token_file, args.shm, args.no_shm, on_ready,
                        recordings_dir=args.recordings_dir, time=args.time)
    except (_native.Error, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        # Ctrl-C already stopped the hub in an orderly way; Python noticed
        # the signal only once the hub had returned.
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
