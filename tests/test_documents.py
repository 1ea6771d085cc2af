import json
import zlib
from dataclasses import replace
from pathlib import Path

import pytest

from ragmend.errors import InputError
from ragmend.rag.documents import html_to_text, load_source
from tests.bounded import finishes

MAX = 10_000_000


def test_directory_of_text_markdown_html(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("Plain text about ships.")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.md").write_text("# Harbours\n\nHarbours shelter ships.")
    (tmp_path / "c.html").write_text(
        "<html><head><style>p{}</style><script>var x=1;</script></head>"
        "<body><h1>Lighthouses</h1><p>Lighthouses &amp; beacons guide ships.</p></body></html>"
    )
    (tmp_path / "ignored.bin").write_bytes(b"\x00\x01")
    docs = {d.id: d for d in load_source(tmp_path, MAX)}
    assert set(docs) == {"a.txt", "sub/b.md", "c.html"}
    assert docs["sub/b.md"].title == "Harbours"
    assert "var x" not in docs["c.html"].text and "Lighthouses & beacons guide ships." in docs["c.html"].text


CAFES = """# Cafe Aurora

Cafe Aurora is a small coffee shop in Tromso, Norway. It opened in 2015.

## Blue Fern Tea House

Blue Fern Tea House is a tea room in Kyoto. It seats twenty guests.

```sh
# not a heading: a comment in a code block
```
"""


def test_a_markdown_file_is_read_section_by_section(tmp_path: Path) -> None:
    """Each section under its own heading (a chunk about the second is not titled by the first);
    a "#" line in a code block is code; other files, and Markdown without headings, whole."""
    (tmp_path / "cafes.md").write_text("Opening notes.\n\n" + CAFES)
    (tmp_path / "plain.md").write_text("No headings at all.")
    (tmp_path / "notes.txt").write_text("# not Markdown\n\nA text file.")
    docs = {d.id: d for d in load_source(tmp_path, MAX)}
    sections = docs["cafes.md"].sections()
    assert [title for title, _ in sections] == ["cafes", "Cafe Aurora", "Blue Fern Tea House"]
    assert sections[0][1] == "Opening notes."
    assert "seats twenty guests" in sections[2][1] and "# not a heading" in sections[2][1]
    assert "Tromso" in sections[1][1] and "Kyoto" not in sections[1][1]
    assert docs["plain.md"].sections() == [("plain", "No headings at all.")]
    assert docs["notes.txt"].sections() == [(docs["notes.txt"].title, docs["notes.txt"].text)]
    # How a Markdown file is chunked is part of its fingerprint: an index made before
    # sections were read chunks it again.
    assert docs["plain.md"].fingerprint != replace(docs["plain.md"], markdown=False).fingerprint


def test_jsonl(tmp_path: Path) -> None:
    p = tmp_path / "c.jsonl"
    p.write_text(
        json.dumps({"id": 1, "title": "T", "text": "hello"}) + "\n\n" + json.dumps({"id": "x", "text": "w"})
    )
    docs = load_source(p, MAX)
    assert [(d.id, d.title, d.text) for d in docs] == [("1", "T", "hello"), ("x", "", "w")]


def test_a_jsonl_row_may_say_how_far_its_source_is_trusted(tmp_path: Path) -> None:
    p = tmp_path / "c.jsonl"
    rows = [
        {"id": "a", "text": "x", "trust": 0.9},
        {"id": "b", "text": "y", "trust": 0},
        {"id": "c", "text": "z"},
    ]
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    docs = load_source(p, MAX)
    assert [d.trust for d in docs] == [0.9, 0.0, None]
    # A changed trust level is re-indexed; a document without one keeps the fingerprint it had.
    assert docs[0].fingerprint != replace(docs[0], trust=0.5).fingerprint
    assert docs[2].fingerprint == replace(docs[2], trust=None).fingerprint


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"id": "a", "text": "ok", "trust": 1.5}\n', r"c\.jsonl:1: 'trust' must be a number from 0 to 1"),
        ('{"id": "a", "text": "ok", "trust": "high"}\n', r"'trust' must be a number from 0 to 1, got 'high'"),
        ('{"id": "a", "text": "ok", "trust": true}\n', r"'trust' must be a number"),
        ('{"id": "a", "text": "ok"}\n{not json}\n', r"c\.jsonl:2: not valid JSON"),
        ('{"id": "a"}\n', "missing or empty field"),
        ('["a", "b"]\n', "not a JSON object"),
        ('{"id": "a", "text": "x"}\n{"id": "a", "text": "y"}\n', "duplicate document id"),
    ],
)
def test_bad_jsonl_names_the_line(tmp_path: Path, content: str, message: str) -> None:
    p = tmp_path / "c.jsonl"
    p.write_text(content)
    with pytest.raises(InputError, match=message):
        load_source(p, MAX)


def test_missing_path_and_unsupported_type(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="does not exist"):
        load_source(tmp_path / "nope", MAX)
    (tmp_path / "x.docx").write_bytes(b"PK")
    with pytest.raises(InputError, match="unsupported file type"):
        load_source(tmp_path / "x.docx", MAX)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(InputError, match="no documents"):
        load_source(empty, MAX)


def test_non_utf8_file_is_named(tmp_path: Path) -> None:
    (tmp_path / "good.txt").write_text("fine")
    (tmp_path / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    with pytest.raises(InputError, match=r"latin1\.txt is not valid UTF-8"):
        load_source(tmp_path, MAX)


def test_file_over_the_size_limit(tmp_path: Path) -> None:
    (tmp_path / "big.txt").write_text("x" * 2000)
    with pytest.raises(InputError, match=r"over rag\.max_file_bytes"):
        load_source(tmp_path, 1000)


def test_unreadable_file_simulated_permission_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The suite runs as root in CI, where chmod 000 does not stop a read: the OS error is simulated.
    target = tmp_path / "secret.txt"
    target.write_text("hidden")
    original = Path.read_bytes

    def read_bytes(self: Path) -> bytes:
        if self == target:
            raise PermissionError(13, "Permission denied")
        return original(self)

    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    with pytest.raises(InputError, match="permission denied"):
        load_source(tmp_path, MAX)


def test_html_to_text_blocks() -> None:
    assert html_to_text("<p>a</p><p>b<br>c</p>") == "a\nb\nc"


def _minimal_pdf(text: str, padding: int = 0) -> bytes:
    """A one-page PDF with `text` in Helvetica, with a correct cross-reference table; `padding`:
    that many spaces after the text operators, its content stream Flate-compressed."""
    stream = f"BT /F1 18 Tf 72 700 Td ({text}) Tj ET".encode()
    extra = b""
    if padding:
        stream = zlib.compress(stream + b" " * padding, 9)
        extra = b" /Filter /FlateDecode"
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length " + str(len(stream)).encode() + extra + b" >>\nstream\n" + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for i, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{i} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{o:010d} 00000 n \n".encode() for o in offsets)
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)


def test_pdf_text_is_extracted(tmp_path: Path) -> None:
    (tmp_path / "report.pdf").write_bytes(_minimal_pdf("Tidal power stations turn tides into electricity."))
    (doc,) = load_source(tmp_path, MAX)
    assert doc.id == "report.pdf" and "Tidal power stations turn tides into electricity." in doc.text


def test_corrupt_pdf_is_named(tmp_path: Path) -> None:
    (tmp_path / "broken.pdf").write_bytes(b"%PDF-1.4\nnot really a pdf")
    with pytest.raises(InputError, match=r"broken\.pdf is not a readable PDF"):
        load_source(tmp_path, MAX)


def test_a_pdf_that_expands_past_the_decompression_limit_is_named(tmp_path: Path) -> None:
    """80 MB of content from an 80 kB file: pypdf stops at its limit, and the error names the file
    (it was an unhandled 500 on an upload)."""
    (tmp_path / "bomb.pdf").write_bytes(_minimal_pdf("x", padding=80_000_000))
    with pytest.raises(InputError, match=r"bomb\.pdf is not a readable PDF: LimitReachedError"):
        load_source(tmp_path, MAX)


def test_a_pdf_whose_text_runs_past_the_limit_is_refused(tmp_path: Path) -> None:
    from ragmend.rag.documents import _pdf_text

    (tmp_path / "long.pdf").write_bytes(_minimal_pdf("Tidal power stations turn tides into electricity."))
    with pytest.raises(InputError, match=r"long\.pdf: its text runs past 20 characters"):
        _pdf_text(tmp_path / "long.pdf", max_chars=20)


def test_a_deeply_nested_jsonl_line_is_named(tmp_path: Path) -> None:
    (tmp_path / "deep.jsonl").write_text('{"id": "a", "text": "ok"}\n' + "[" * 200_000 + "\n")
    with pytest.raises(InputError, match=r"deep\.jsonl:2: JSON nested too deeply"):
        load_source(tmp_path / "deep.jsonl", MAX)


def test_the_jsonl_reader_examples_run() -> None:
    import doctest

    from ragmend import jsonl

    assert doctest.testmod(jsonl).failed == 0


def test_a_long_line_of_spaces_is_no_stall_for_the_heading_reader() -> None:
    """A Markdown line of 100k spaces between a heading's words (the old pattern backtracked
    cubically on it: 1,500 spaces took seconds, this many would take hours)."""
    out = finishes(
        "from ragmend.rag.documents import SourceDocument as D\n"
        "line = '# a' + ' ' * 100_000 + ' #' + ' ' * 100_000 + 'x'\n"
        "d = D(id='x.md', title='x', text=line + '\\ntext', source='x.md', markdown=True)\n"
        "print(len(d.sections()))"
    )
    assert out.strip() == "1"
