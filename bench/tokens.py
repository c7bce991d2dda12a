"""Token files: a flat array of token ids behind a 32-byte header, read memory-mapped.

    offset  size  field
    0       8     magic b"HPCBTOK1"
    8       4     bytes per token, 2 (uint16) or 4 (uint32), little-endian
    12      4     vocabulary size: every id is below it
    16      8     number of tokens
    24      8     zero (reserved)
    32            the tokens, little-endian

Make one from text with a byte-level tokenizer (one token per UTF-8 byte, a
vocabulary of 256; no merges, so a token is a byte, not a word):

    python bench/tokens.py OUT.tok [TEXT_FILE ...]   (default: the checkout's docs)

The header is read with the standard library alone (the harness checks it before
a launch); the ids are checked and read with torch on the nodes. Every problem is
one line (TokenFileError). Never imports hpcbench.
"""

from __future__ import annotations

import mmap
import struct
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MAGIC = b"HPCBTOK1"
HEADER = struct.Struct("<8sIIQQ")  # 32 bytes
ITEMSIZES = {2: "uint16", 4: "uint32"}
BYTE_VOCAB = 256
SCAN_CHUNK = 1 << 24  # tokens checked at a time


class TokenFileError(ValueError):
    """A token file the workload cannot read: the message is one line naming the file."""


@dataclass(frozen=True)
class Header:
    itemsize: int
    vocab: int
    count: int

    @property
    def dtype(self) -> str:
        return ITEMSIZES[self.itemsize]


def parse_header(raw: bytes, file_size: int, name: str = "token file") -> Header:
    """The header of a file of file_size bytes whose first bytes are raw."""
    if len(raw) < HEADER.size or raw[:8] != MAGIC:
        raise TokenFileError(f"{name}: not a token file (no {MAGIC.decode()} header)")
    _, itemsize, vocab, count, reserved = HEADER.unpack(raw[: HEADER.size])
    if itemsize not in ITEMSIZES:
        raise TokenFileError(f"{name}: {itemsize} bytes per token; a token file holds 2 or 4")
    if not 1 <= vocab <= 1 << (8 * itemsize):
        raise TokenFileError(
            f"{name}: a vocabulary of {vocab} does not fit {ITEMSIZES[itemsize]} ids"
        )
    if reserved:
        raise TokenFileError(f"{name}: the header's reserved field is not zero")
    if file_size != HEADER.size + count * itemsize:
        raise TokenFileError(
            f"{name}: the header says {count} tokens of {itemsize} bytes, the file holds "
            f"{file_size - HEADER.size} bytes after it"
        )
    return Header(itemsize, vocab, count)


def read_header(path: str | Path) -> Header:
    p = Path(path)
    try:
        with open(p, "rb") as f:
            raw = f.read(HEADER.size)
            size = f.seek(0, 2)
    except OSError as err:
        raise TokenFileError(f"{p}: {err.strerror or err}") from None
    return parse_header(raw, size, str(p))


def check_fits(header: Header, model_vocab: int, seq_len: int, name: str) -> None:
    """The file's ids fit the model, and it holds one sequence at least."""
    if header.vocab > model_vocab:
        raise TokenFileError(
            f"{name}: its vocabulary of {header.vocab} is larger than the model's {model_vocab}"
        )
    if header.count < seq_len + 1:
        raise TokenFileError(
            f"{name}: {header.count} tokens are fewer than one sequence of {seq_len} and its "
            "next token"
        )


def write(path: str | Path, ids: list[int] | bytes, vocab: int, itemsize: int = 2) -> Header:
    """A token file of these ids (each below vocab)."""
    if itemsize not in ITEMSIZES or not 1 <= vocab <= 1 << (8 * itemsize):
        raise TokenFileError(f"vocabulary {vocab} in {itemsize}-byte ids: not a token file")
    bad = next((t for t in ids if not 0 <= t < vocab), None)
    if bad is not None:
        raise TokenFileError(f"token id {bad} is not below the vocabulary of {vocab}")
    body = struct.pack(f"<{len(ids)}{'H' if itemsize == 2 else 'I'}", *ids)
    Path(path).write_bytes(HEADER.pack(MAGIC, itemsize, vocab, len(ids), 0) + body)
    return Header(itemsize, vocab, len(ids))


class TokenFile:
    """A token file memory-mapped; windows(starts, length) reads sequences as int64."""

    def __init__(self, path: str | Path, model_vocab: int, seq_len: int) -> None:
        self.path = Path(path)
        self.header = read_header(self.path)
        check_fits(self.header, model_vocab, seq_len, str(self.path))
        with open(self.path, "rb") as f:  # copy-on-write: torch wants a writable buffer
            self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
        self.check_ids()

    def _ids(self, start: int, count: int) -> Any:
        import torch

        dtype = torch.uint16 if self.header.itemsize == 2 else torch.uint32
        view = torch.frombuffer(
            self._map, dtype=dtype, count=count, offset=HEADER.size + start * self.header.itemsize
        )
        return view.to(torch.int64)

    def check_ids(self) -> None:
        """Every id below the file's vocabulary; the first that is not, named."""
        vocab, count = self.header.vocab, self.header.count
        for start in range(0, count, SCAN_CHUNK):
            ids = self._ids(start, min(SCAN_CHUNK, count - start))
            if int(ids.max()) >= vocab:
                at = int((ids >= vocab).nonzero()[0])
                raise TokenFileError(
                    f"{self.path}: token id {int(ids[at])} at position {start + at} is not "
                    f"below the vocabulary of {vocab}"
                )

    def windows(self, starts: list[int], length: int) -> Any:
        """The sequences of `length` tokens that begin at these positions, stacked."""
        import torch

        return torch.stack([self._ids(s, length) for s in starts])


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0].startswith("-"):
        print("usage: python bench/tokens.py OUT.tok [TEXT_FILE ...]", file=sys.stderr)
        return 2
    out, sources = Path(args[0]), [Path(a) for a in args[1:]]
    if not sources:  # the text this project ships
        root = Path(__file__).resolve().parent.parent
        sources = [root / "README.md", *sorted((root / "docs").glob("*.md"))]
    try:
        text = b"\n".join(p.read_bytes() for p in sources)
    except OSError as err:
        print(f"tokens.py: {err.filename}: {err.strerror}", file=sys.stderr)
        return 2
    header = write(out, text, BYTE_VOCAB)
    print(f"{out}: {header.count} tokens, byte-level, vocabulary {BYTE_VOCAB}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
