"""Print the shell-quoted words of an environment variable, each ended by NUL, for a bash `read -d ''` loop.

action.yml's inputs arrive as strings; `read -ra` would split `--model "m.py:GPT(n_layer=2, n_head=4)"`
at the space inside the quotes, and `eval` would run whatever the string holds. shlex parses the
quoting as a POSIX shell does and runs nothing.
"""

import os
import shlex
import sys


def main() -> int:
    name = sys.argv[1]
    try:
        words = shlex.split(os.environ.get(name, ""))
    except ValueError as error:
        print(f"::error title=reslint::{name}: cannot split {os.environ.get(name)!r}: {error}", file=sys.stderr)
        return 2
    sys.stdout.write("".join(word + "\0" for word in words))
    return 0


if __name__ == "__main__":
    sys.exit(main())
