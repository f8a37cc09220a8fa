"""Path globs (`exclude`, `per-file-ignores`, `train`) matched in linear time.

The config comes from the checked tree: a pattern such as `**/**/**/.../zz` made a backtracking
regex take minutes on one path. Here a pattern is a list of tokens run as a set of states over
the path, so matching costs at most len(path) × len(pattern) steps, whatever the pattern.

`**/` is any number of directories, `**` anything, `*` and `?` stay within one component,
`[abc]`, `[a-z]`, `[!a-z]` are character classes.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

LITERAL, ONE, STAR, DIRS, ANYTHING, CLASS = range(6)


class GlobError(ValueError):
    """A pattern that cannot mean anything, e.g. the reversed range in `a/[z-a]`."""


@dataclass(frozen=True)
class Token:
    kind: int
    char: str = ""
    ranges: tuple[tuple[str, str], ...] = ()
    negate: bool = False

    def accepts(self, char: str) -> bool:
        if self.kind == LITERAL:
            return char == self.char
        if char == "/":
            return self.kind == ANYTHING or self.kind == DIRS
        if self.kind == CLASS:
            return any(low <= char <= high for low, high in self.ranges) != self.negate
        return True


@lru_cache(maxsize=256)
def compile_glob(pattern: str) -> tuple[Token, ...]:
    """The tokens of a pattern; GlobError for an invalid character class."""
    tokens, index = [], 0
    while index < len(pattern):
        if pattern.startswith("**/", index):
            tokens.append(Token(DIRS))
            index += 3
        elif pattern.startswith("**", index):
            tokens.append(Token(ANYTHING))
            index += 2
        elif pattern[index] == "*":
            tokens.append(Token(STAR))
            index += 1
        elif pattern[index] == "?":
            tokens.append(Token(ONE))
            index += 1
        elif pattern[index] == "[" and "]" in pattern[index + 2:]:
            end = pattern.index("]", index + 2)
            tokens.append(character_class(pattern[index + 1:end], pattern))
            index = end + 1
        else:
            tokens.append(Token(LITERAL, pattern[index]))
            index += 1
    return tuple(tokens)


def character_class(body: str, pattern: str) -> Token:
    negate = body.startswith("!")
    body = body[1:] if negate else body
    ranges, index = [], 0
    while index < len(body):
        if index + 2 < len(body) and body[index + 1] == "-":
            low, high = body[index], body[index + 2]
            if low > high:
                raise GlobError(f"invalid range {low}-{high} in {pattern!r}")
            ranges.append((low, high))
            index += 3
        else:
            ranges.append((body[index], body[index]))
            index += 1
    return Token(CLASS, ranges=tuple(ranges), negate=negate)


def glob_matches(pattern: str, text: str) -> bool:
    """Whether the whole of `text` matches `pattern`."""
    tokens = compile_glob(pattern)
    states = closure({0}, tokens)
    for char in text:
        following = set()
        for state in states:
            if state == len(tokens):
                continue
            token = tokens[state]
            if token.kind in (STAR, ANYTHING, DIRS) and token.accepts(char):
                following.add(state)  # the repeating part goes on
                if token.kind == DIRS and char == "/":
                    following.add(state + 1)
            elif token.kind not in (STAR, ANYTHING, DIRS) and token.accepts(char):
                following.add(state + 1)
        if not following:
            return False
        states = closure(following, tokens)
    return len(tokens) in states


def closure(states: set[int], tokens: tuple[Token, ...]) -> set[int]:
    """Add the states reached without reading: `*`, `**` and `**/` may match nothing."""
    pending, reached = list(states), set(states)
    while pending:
        state = pending.pop()
        if state < len(tokens) and tokens[state].kind in (STAR, ANYTHING, DIRS) and state + 1 not in reached:
            reached.add(state + 1)
            pending.append(state + 1)
    return reached
