"""A campaign file's text as YAML data, refused in one line (UsageError) where it
cannot be read: missing or unreadable, over 1 MB, not YAML, a key given twice in one
mapping, aliases that refer to themselves or expand without end, or nesting
deeper than MAX_DEPTH. A whole number too long for Python to
convert is kept as a TooLong, so that the checks of the data name its key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from hpcbench.core import files
from hpcbench.core.errors import UsageError, one_line
from hpcbench.launchers.parse import check_path

MAX_NODES = 100_000  # values in a campaign file once its aliases are expanded


class _UniqueKeyLoader(yaml.SafeLoader):
    """safe_load, but a key given twice in one mapping is an error (YAML keeps the last
    silently, so `nodes:` written twice would run what the user did not read), and a
    value its tag cannot hold (`!!bool maybe`, `!!timestamp x`, `!!map [1]`: PyYAML's
    constructors raise KeyError, AttributeError, TypeError) is a YAML error at its line."""

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep=deep)
        except (ValueError, TypeError, KeyError, AttributeError, IndexError) as err:
            tag = str(node.tag).rsplit(":", 1)[-1]
            what = (
                repr(node.value)[:40]
                if isinstance(node, yaml.ScalarNode)
                else type(node).__name__.removesuffix("Node").lower()  # sequence, mapping
            )
            why = f" ({one_line(str(err), 80)})" if isinstance(err, ValueError) else ""
            raise yaml.constructor.ConstructorError(
                None, None, f"{what} is no {tag}{why}", node.start_mark
            ) from None


def _unique_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False) -> Any:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *anchor`: its keys may be overridden
            continue
        key = loader.construct_object(key_node, deep=deep)
        if isinstance(key, str | int | float | bool) and key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"key {key!r} is given twice", key_node.start_mark
            )
        seen.add(key) if isinstance(key, str | int | float | bool) else None
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
    _unique_mapping,
)


class TooLong:
    """A whole number of more digits than Python converts from text
    (sys.get_int_max_str_digits; PyYAML's int() of it raises ValueError): kept as
    this, so that the check of the file names its key."""

    def __init__(self, digits: int) -> None:
        self.digits = digits

    def __repr__(self) -> str:
        return f"<a number of {self.digits} digits>"


def _int_or_too_long(loader: _UniqueKeyLoader, node: yaml.ScalarNode) -> Any:
    try:
        return loader.construct_yaml_int(node)
    except ValueError:
        digits = str(node.value).replace("_", "").lstrip("+-")
        if digits.isascii() and digits.isdigit():  # whole, but past what int() reads
            return TooLong(len(node.value))
        raise  # `!!int x`: no number at all


_UniqueKeyLoader.add_constructor(
    "tag:yaml.org,2002:int",
    _int_or_too_long,
)


def read_yaml(path: Path) -> Any:
    check_path(str(path), "campaign file")
    try:
        # The file the user named (a link there is theirs): never waited on (a FIFO), read
        # to at most files.CAMPAIGN_FILE (over it, /dev/zero: one line).
        text = files.read_bounded(path, files.CAMPAIGN_FILE, root=path).decode("utf-8")
    except FileNotFoundError:
        raise UsageError(f"{path}: no such campaign file (campaigns/ holds examples)") from None
    except (OSError, UnicodeDecodeError) as err:
        why = getattr(err, "strerror", None) or type(err).__name__
        raise UsageError(f"{path}: cannot read it ({why})") from None
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 (a SafeLoader)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise UsageError(f"{path}: not valid YAML ({where}{problem})") from None
    except RecursionError:
        raise UsageError(f"{path}: nested more than YAML can read") from None
    except (ValueError, TypeError, KeyError, AttributeError, IndexError) as err:
        # A tagged value a constructor refuses after its node is built (a !!set or
        # !!omap fills in later); construct_object names the others with their line.
        raise UsageError(f"{path}: not valid YAML ({one_line(str(err), 200)})") from None
    why = _too_big(data)
    if why:
        raise UsageError(f"{path}: {why}: write the campaign out plainly")
    return data


MAX_DEPTH = 64  # levels of nesting; a campaign file needs a handful


def _too_big(data: Any) -> str | None:
    """Why the document cannot be walked (None: it can): an alias inside what it
    names (json.dumps of it never ends), more than MAX_NODES values once aliases are
    expanded, or nesting deeper than MAX_DEPTH. Mappings, lists and what !!omap,
    !!pairs and !!set build (tuples, sets) are walked alike."""
    # Depth first; an exit marker takes a collection off the path it is on.
    stack: list[tuple[Any, int] | int] = [(data, 0)]
    on_path: set[int] = set()
    seen = 0
    while stack:
        top = stack.pop()
        if isinstance(top, int):  # leaving the collection of this id
            on_path.discard(top)
            continue
        node, depth = top
        seen += 1
        if seen > MAX_NODES:
            return f"its aliases expand to over {MAX_NODES} values"
        if not isinstance(node, dict | list | tuple | set | frozenset):
            continue
        if id(node) in on_path:
            return "an alias refers to the collection that holds it"
        if depth >= MAX_DEPTH:
            return f"nested deeper than {MAX_DEPTH} levels"
        on_path.add(id(node))
        stack.append(id(node))
        inner = [*node.keys(), *node.values()] if isinstance(node, dict) else list(node)
        stack += [(v, depth + 1) for v in inner]
    return None
