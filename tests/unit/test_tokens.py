"""Token files (bench/tokens.py): what is written is read back, and whatever else is
handed over as one is refused in one line naming the file, never read wrongly."""

from __future__ import annotations

import struct
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
import tokens  # noqa: E402

FILE_CASES = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _header(itemsize: int, vocab: int, count: int, reserved: int = 0) -> bytes:
    return tokens.HEADER.pack(tokens.MAGIC, itemsize, vocab, count, reserved)


@FILE_CASES
@given(raw=st.binary(max_size=96))
def test_any_bytes_are_a_header_or_one_line(tmp_path, raw):
    path = tmp_path / "any.tok"
    path.write_bytes(raw)
    try:
        header = tokens.read_header(path)
    except tokens.TokenFileError as err:
        assert "\n" not in str(err) and str(path) in str(err)
    else:  # only a file whose header describes it exactly
        assert raw[:8] == tokens.MAGIC
        assert len(raw) == tokens.HEADER.size + header.count * header.itemsize


@FILE_CASES
@given(
    itemsize=st.sampled_from([1, 2, 3, 4, 8]),
    vocab=st.integers(0, 2**32 - 1),
    count=st.integers(0, 40),
    extra=st.integers(-3, 3),
    reserved=st.sampled_from([0, 0, 1]),
)
def test_a_header_that_does_not_describe_its_file_is_refused(
    tmp_path, itemsize, vocab, count, extra, reserved
):
    path = tmp_path / "h.tok"
    body = bytes(max(0, count * itemsize + extra))
    path.write_bytes(_header(itemsize, vocab, count, reserved) + body)
    fits = (
        itemsize in (2, 4)
        and 1 <= vocab <= 1 << (8 * itemsize)
        and reserved == 0
        and len(body) == count * itemsize
    )
    if fits:
        assert tokens.read_header(path) == tokens.Header(itemsize, vocab, count)
    else:
        with pytest.raises(tokens.TokenFileError):
            tokens.read_header(path)


@FILE_CASES
@given(
    itemsize=st.sampled_from([2, 4]),
    ids=st.lists(st.integers(0, 70000), min_size=2, max_size=60),
    vocab=st.integers(2, 70001),
)
def test_an_id_at_or_above_the_vocabulary_is_named(tmp_path, itemsize, ids, vocab):
    pytest.importorskip("torch")
    if itemsize == 2:
        ids = [i % 65536 for i in ids]
        vocab = min(vocab, 65536)
    path = tmp_path / "ids.tok"
    fmt = "<" + ("H" if itemsize == 2 else "I") * len(ids)
    path.write_bytes(_header(itemsize, vocab, len(ids)) + struct.pack(fmt, *ids))
    bad = [k for k, i in enumerate(ids) if i >= vocab]
    if not bad:
        got = tokens.TokenFile(path, model_vocab=vocab, seq_len=1).windows([0], len(ids))
        assert got.tolist() == [ids]
        return
    with pytest.raises(tokens.TokenFileError) as err:
        tokens.TokenFile(path, model_vocab=vocab, seq_len=1)
    assert f"token id {ids[bad[0]]} at position {bad[0]} " in str(err.value)
    assert "\n" not in str(err.value)


def test_a_file_for_a_larger_vocabulary_or_too_short_does_not_fit(tmp_path):
    path = tmp_path / "t.tok"
    header = tokens.write(path, list(range(10)), vocab=300)
    with pytest.raises(tokens.TokenFileError, match="vocabulary of 300 is larger than the model"):
        tokens.check_fits(header, 256, 4, str(path))
    with pytest.raises(tokens.TokenFileError, match="10 tokens are fewer than one sequence of 10"):
        tokens.check_fits(header, 4096, 10, str(path))
    tokens.check_fits(header, 4096, 9, str(path))  # 10 tokens: 9 and the next
