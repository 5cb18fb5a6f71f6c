"""``python -m fieldhub hub [--config FILE] [--listen ADDR]... [--token T]``:
run a hub in this process until SIGINT/SIGTERM (what :class:`fieldhub.Hub`
starts). The hub is the same Rust hub as the ``fieldhub`` command's."""

import argparse
import sys

from fieldhub import _native


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m fieldhub")
    commands = parser.add_subparsers(dest="command", required=True)
    hub = commands.add_parser("hub", help="run a hub")
    hub.add_argument("--config", help="TOML configuration file (default: the built-in one)")
    hub.add_argument("--listen", action="append", default=[], help="HOST:PORT or unix:PATH; repeatable")
    hub.add_argument("--token", help="token clients must present")
    args = parser.parse_args()
    text = None
    if args.config:
        with open(args.config) as f:
            text = f.read()
    try:
        _native.run_hub(text, args.config or "built-in default configuration", args.listen, args.token)
    except _native.Error as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
