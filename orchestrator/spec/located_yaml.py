"""Read a YAML file safely and remember the line of every node, so errors can point at it.

PyYAML's safe loader refuses object tags; on top of it this module refuses duplicate keys
(which PyYAML would silently overwrite), keys that are not names, values their tag cannot
read (`!!int abc`, a date with month 13), deep nesting, and maps each data path to its
1-based line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from orchestrator.errors import SpecError

PathKey = tuple[str | int, ...]
MAX_BYTES = 10 * 2**20  # a matrix is a few kB; more is some other file given by mistake
MAX_NODES = 100_000  # far beyond any real matrix; bounds what aliases can multiply
MAX_DEPTH = 32  # the schema nests 5 deep; deeper is a slip (or aimed at the parser's stack)
YAML_TAG = "tag:yaml.org,2002:"
# The standard tags each kind of node may carry; any other tag is refused where it stands.
NODE_TAGS: dict[type[yaml.Node], tuple[str, ...]] = {
    yaml.ScalarNode: tuple(YAML_TAG + t for t in
                           ("str", "int", "float", "bool", "null", "binary", "timestamp")),
    yaml.SequenceNode: (YAML_TAG + "seq", YAML_TAG + "omap", YAML_TAG + "pairs"),
    yaml.MappingNode: (YAML_TAG + "map", YAML_TAG + "set"),
}


class SpecLoader(yaml.SafeLoader):
    """PyYAML's safe loader, reading floats as YAML 1.2 does: `1e-3` is a number, not the
    string YAML 1.1 makes of it (users write learning rates that way)."""


# A copy of the resolver table, so the global SafeLoader is left as it is.
SpecLoader.yaml_implicit_resolvers = {
    first: list(resolvers) for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
SpecLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


@dataclass(frozen=True)
class LocatedYaml:
    """Parsed data plus the line where each path of it starts."""

    path: Path
    data: Any
    lines: dict[PathKey, int]

    def line_of(self, loc: PathKey) -> int | None:
        """Line of the deepest node along `loc` that exists in the file."""
        for depth in range(len(loc), -1, -1):
            line = self.lines.get(tuple(loc[:depth]))
            if line is not None:
                return line
        return None

    def error(self, loc: PathKey, problem: str) -> SpecError:
        return SpecError(self.path, self.line_of(loc), format_loc(loc), problem)


def format_loc(loc: PathKey) -> str:
    """("workloads", 0, "params") -> "workloads[0].params"."""
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def read_yaml(path: Path) -> LocatedYaml:
    """Parse `path`; SpecError (with a line where possible) on anything unreadable."""
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_BYTES + 1)
    except FileNotFoundError:
        raise SpecError(path, None, "", "file not found") from None
    except IsADirectoryError:
        raise SpecError(path, None, "", "is a directory, not a matrix file") from None
    except OSError as exc:
        raise SpecError(path, None, "", f"cannot read the file: {exc.strerror}") from None
    if len(raw) > MAX_BYTES:
        raise SpecError(path, None, "", f"larger than {MAX_BYTES // 2**20} MiB: not a matrix "
                                        "file (a matrix is a few kB of YAML)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        column = exc.start - raw.rfind(b"\n", 0, exc.start)
        raise SpecError(path, line, "", f"not UTF-8 text (byte {raw[exc.start]:#04x} at "
                                        f"column {column})") from None
    try:
        node = yaml.compose(text, Loader=SpecLoader)
    except RecursionError:
        raise SpecError(path, None, "", f"malformed YAML: nested more than {MAX_DEPTH} "
                                        "levels deep") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        raise SpecError(path, mark.line + 1 if mark else None, "",
                        f"malformed YAML: {_syntax_problem(exc)}") from None
    except yaml.reader.ReaderError as exc:  # a character YAML does not allow
        line = text[:exc.position].count("\n") + 1
        raise SpecError(path, line, "", f"malformed YAML: {exc.reason} "
                                        f"(character {exc.character!r})") from None
    except yaml.YAMLError as exc:
        raise SpecError(path, None, "", f"malformed YAML: {exc}") from None
    lines: dict[PathKey, int] = {}
    if node is not None:
        _index(node, (), lines, path, set(), _Walk())
    try:
        data = yaml.load(text, Loader=SpecLoader)  # a SafeLoader: object tags are refused
    except yaml.MarkedYAMLError as exc:  # what _index lets through: a malformed !!set, say
        marked = exc.problem_mark.line + 1 if exc.problem_mark else None
        loc = min((loc for loc, at in lines.items() if at == marked and loc), key=len,
                  default=())
        raise SpecError(path, marked, format_loc(loc), f"malformed YAML: {exc.problem}") \
            from None
    return LocatedYaml(path=path, data=data, lines=lines)


def _syntax_problem(exc: yaml.MarkedYAMLError) -> str:
    """PyYAML's problem, with where the construct it was reading began (an unclosed
    bracket or quote is found lines after it was opened)."""
    problem, context = exc.problem or str(exc), exc.context
    if not context:
        return problem
    if problem.startswith("but "):  # "expected a single document ..., but found another"
        return f"{context}, {problem}"
    start = exc.context_mark
    if start is None:  # "while scanning for the next token": nothing to add
        return problem
    return f"{problem} ({context} from line {start.line + 1})"


def _short_tag(tag: str) -> str:
    return "!!" + tag.removeprefix(YAML_TAG) if tag.startswith(YAML_TAG) else tag


def _shown(text: str) -> str:
    return repr(text if len(text) <= 40 else text[:40] + "...")


_PROBE = SpecLoader("")  # reads single scalars, to find the one a tag cannot read


def _node_problem(node: yaml.Node) -> str | None:
    """Why `node` cannot become a value: a tag that is not plain YAML, or a scalar its tag
    cannot read (PyYAML would raise a bare ValueError, AttributeError or KeyError)."""
    if isinstance(node, yaml.ScalarNode) and node.tag in (YAML_TAG + "merge",
                                                         YAML_TAG + "value"):
        return f"{node.value!r} means something else to YAML: put it in quotes"
    if node.tag not in NODE_TAGS.get(type(node), ()):
        return f"tag {_short_tag(node.tag)} is not allowed (plain YAML only)"
    if isinstance(node, yaml.ScalarNode):
        try:
            SpecLoader.yaml_constructors[node.tag](_PROBE, node)
        except (yaml.YAMLError, ValueError, TypeError, AttributeError, KeyError,
                OverflowError):
            return f"{_shown(node.value)} is not a valid {_short_tag(node.tag)[2:]}"
    return None


def _key_problem(key: yaml.Node) -> str | None:
    if not isinstance(key, yaml.ScalarNode):
        kind = "a list" if isinstance(key, yaml.SequenceNode) else "a mapping"
        return f"a key must be a plain name, not {kind}"
    if key.tag not in (YAML_TAG + "str", YAML_TAG + "merge"):
        return (f"the key {_shown(key.value)} reads as {_short_tag(key.tag)[2:]}, not as a "
                "name (quote it if you mean it)")
    return None


@dataclass
class _Walk:
    """The nodes `_index` may still visit (an alias's each time), and the distinct ones."""

    left: int = MAX_NODES
    distinct: set[int] = field(default_factory=set)


def _index(node: yaml.Node, loc: PathKey, lines: dict[PathKey, int], path: Path,
           above: set[int], walk: _Walk) -> None:
    """Record each path's line; refuse duplicate keys, an alias inside itself (a cycle),
    and a document past MAX_NODES: aliases multiplying it (a "billion laughs"), or plainly
    too long (a parameter list of a million values)."""
    line = node.start_mark.line + 1
    if id(node) in above:
        raise SpecError(path, line, format_loc(loc), "a YAML alias refers to a node that "
                                                     "contains it (a cycle)")
    walk.left -= 1
    walk.distinct.add(id(node))
    if walk.left < 0:
        why = (f"the document expands to more than {MAX_NODES:,} nodes through its aliases"
               if len(walk.distinct) <= MAX_NODES else
               f"the document holds more than {MAX_NODES:,} values, far more than any matrix "
               "needs (a list of that length is no grid axis)")
        raise SpecError(path, line, format_loc(loc), why)
    if len(loc) > MAX_DEPTH:
        raise SpecError(path, line, format_loc(loc[:6]) + "...",
                        f"nested more than {MAX_DEPTH} levels deep")
    problem = _node_problem(node)
    if problem:
        raise SpecError(path, line, format_loc(loc), problem)
    lines[loc] = line
    above = above | {id(node)}
    if isinstance(node, yaml.MappingNode):
        seen: set[object] = set()
        for key_node, value_node in node.value:
            problem = _key_problem(key_node)
            if problem:
                raise SpecError(path, key_node.start_mark.line + 1, format_loc(loc), problem)
            key = key_node.value
            if key in seen:
                line = key_node.start_mark.line + 1
                raise SpecError(path, line, format_loc((*loc, key)), "duplicate key")
            seen.add(key)
            _index(value_node, (*loc, key), lines, path, above, walk)
            lines[(*loc, key)] = key_node.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _index(item, (*loc, index), lines, path, above, walk)
