"""Source documents: a directory of .txt/.md/.html/.pdf files, one such file, or a JSONL file.

Everything is read and validated before anything is written, so a bad file aborts the whole
ingest with a message naming it and leaves the index as it was.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

from ragmend.errors import InputError
from ragmend.jsonl import numbered_objects

# An ATX heading's opening ("# Title", "## Title"; "#hashtag" is not one). The title and its
# optional closing hashes are cut by string methods: a lazy group before `\s*#*\s*$` backtracks
# cubically on a line of spaces.
_HEADING_OPEN = re.compile(r"[ \t]{0,3}#{1,6}[ \t]+(?=\S)")
# The sample corpus shipped in the package (see data/ATTRIBUTION.md): the default source.
BUNDLED_CORPUS = Path(__file__).resolve().parent / "data" / "sample_corpus.jsonl"

MARKDOWN_SUFFIXES = {".md", ".markdown"}
TEXT_SUFFIXES = {".txt"} | MARKDOWN_SUFFIXES
HTML_SUFFIXES = {".html", ".htm"}
PDF_SUFFIXES = {".pdf"}
SUPPORTED = TEXT_SUFFIXES | HTML_SUFFIXES | PDF_SUFFIXES | {".jsonl"}


@dataclass(frozen=True, kw_only=True)
class SourceDocument:
    id: str
    title: str
    text: str
    source: str  # the ingest path it came from (resolved), so re-ingesting a source can drop removals
    # A Markdown file: chunked section by section, each chunk titled by its heading (sections).
    markdown: bool = False
    # How far its source is trusted, in [0, 1] (a JSONL row's "trust"); None: not said. Where the
    # sources disagree, server.conflict_majority weighs each side by it (docs/diagnosis.md).
    trust: float | None = None

    @property
    def fingerprint(self) -> str:
        h = hashlib.sha256()
        for part in (self.id, self.title, self.text):
            h.update(part.encode("utf-8"))
            h.update(b"\0")
        if self.markdown:
            # How it is chunked is part of what was indexed: a Markdown file indexed before
            # sections were read is chunked again at the next ingest.
            h.update(b"markdown-sections-1\0")
        if self.trust is not None:  # a changed trust is re-indexed; an untrusted-by-default file is not
            h.update(f"trust={self.trust!r}\0".encode())
        return h.hexdigest()

    def sections(self) -> list[tuple[str, str]]:
        """(title, text) of each part to chunk on its own: a Markdown file's sections, each
        under its own heading (text before the first one under the document's title), so a chunk
        about the second section is not titled by the first; any other document whole."""
        if not self.markdown:
            return [(self.title, self.text)]
        parts: list[tuple[str, list[str]]] = [(self.title, [])]
        fence = False
        for line in self.text.splitlines():
            if line.lstrip().startswith(("```", "~~~")):
                fence = not fence  # a "#" line inside a code block is code, not a heading
            title = None if fence else heading_title(line)
            if title:
                parts.append((title, []))
            else:
                parts[-1][1].append(line)
        out = [(title, "\n".join(lines).strip()) for title, lines in parts]
        return [(title, text) for title, text in out if text] or [(self.title, self.text)]


def heading_title(line: str) -> str | None:
    """The title of an ATX heading line, without its closing hashes; None for any other line.

    >>> heading_title("## Getting started ##"), heading_title("#hashtag"), heading_title("# C#")
    ('Getting started', None, 'C#')
    """
    m = _HEADING_OPEN.match(line)
    if m is None:
        return None
    title = line[m.end() :].rstrip()
    unclosed = title.rstrip("#")
    if unclosed != title and (not unclosed or unclosed[-1] in " \t"):
        title = unclosed.rstrip()
    return title or None


def load_source(path: Path, max_file_bytes: int) -> list[SourceDocument]:
    """All documents under `path`. Raises InputError for anything that cannot be read."""
    path = Path(path).expanduser()
    if not path.exists():
        raise InputError(f"ingest path does not exist: {path}")
    source = str(path.resolve())
    if path.is_dir():
        files = sorted(
            p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in SUPPORTED - {".jsonl"}
        )
        docs = [_read_file(p, str(p.relative_to(path)), source, max_file_bytes) for p in files]
        docs = [d for d in docs if d.text.strip()]
    elif path.suffix.lower() == ".jsonl":
        docs = _read_jsonl(path, source, max_file_bytes)
    elif path.suffix.lower() in SUPPORTED:
        docs = [_read_file(path, path.name, source, max_file_bytes)]
    else:
        raise InputError(f"unsupported file type '{path.suffix}': {path} (supported: {sorted(SUPPORTED)})")
    if not docs:
        raise InputError(f"no documents with text found under {path} (supported: {sorted(SUPPORTED)})")
    seen: set[str] = set()
    for d in docs:
        if d.id in seen:
            raise InputError(f"duplicate document id '{d.id}' in {path}")
        seen.add(d.id)
    return docs


def _read_bytes(path: Path, max_file_bytes: int) -> bytes:
    try:
        size = path.stat().st_size
        if size > max_file_bytes:
            raise InputError(f"{path} is {size} bytes, over rag.max_file_bytes={max_file_bytes}")
        return path.read_bytes()
    except PermissionError as e:
        raise InputError(f"cannot read {path}: permission denied") from e
    except OSError as e:
        raise InputError(f"cannot read {path}: {e.strerror or e}") from e


def _decode(data: bytes, where: Path | str) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise InputError(f"{where} is not valid UTF-8 (byte {e.start}): convert it to UTF-8 first") from e


def _read_file(path: Path, doc_id: str, source: str, max_file_bytes: int) -> SourceDocument:
    suffix = path.suffix.lower()
    data = _read_bytes(path, max_file_bytes)
    if suffix in PDF_SUFFIXES:
        text = _pdf_text(path, max_file_bytes)
    else:
        text = _decode(data, path)
        if suffix in HTML_SUFFIXES:
            text = html_to_text(text)
    title = _title(text, path)
    return SourceDocument(
        id=doc_id, title=title, text=text.strip(), source=source, markdown=suffix in MARKDOWN_SUFFIXES
    )


def _title(text: str, path: Path) -> str:
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            return stripped.lstrip("#").strip()
        if stripped:
            break
    return path.stem.replace("_", " ")


# A PDF's pages read at most: a small file can hold a page tree that takes minutes to walk.
MAX_PDF_PAGES = 2000


def _pdf_text(path: Path, max_chars: int) -> str:
    """The text of a PDF's pages, refused past MAX_PDF_PAGES pages or `max_chars` characters (the
    file size limit: compressed text can expand far beyond its file)."""
    try:
        from pypdf import PdfReader
        from pypdf.errors import PyPdfError
    except ImportError as e:
        raise InputError(f"{path}: PDF support needs pypdf: pip install 'ragmend[pdf]'") from e
    texts: list[str] = []
    size = 0
    try:
        pages = PdfReader(str(path)).pages
        if len(pages) > MAX_PDF_PAGES:
            raise InputError(f"{path} has {len(pages)} pages, over the limit of {MAX_PDF_PAGES}")
        for page in pages:
            texts.append(page.extract_text() or "")
            size += len(texts[-1])
            if size > max_chars:
                raise InputError(f"{path}: its text runs past {max_chars} characters (the file size limit)")
    except (PyPdfError, ValueError, KeyError, RecursionError) as e:
        raise InputError(f"{path} is not a readable PDF: {type(e).__name__}: {e}") from e
    return "\n".join(texts)


def _read_jsonl(path: Path, source: str, max_file_bytes: int) -> list[SourceDocument]:
    return parse_jsonl(_read_bytes(path, max_file_bytes), path, source)


def parse_jsonl(data: bytes, where: Path | str, source: str) -> list[SourceDocument]:
    """The documents of JSONL bytes (one {"id", "title", "text"} object a line, with an optional
    "trust" in [0, 1]; blank texts skipped): a file's, or a request body's. `where` names it in
    messages."""
    path = where
    text = _decode(data, where)
    docs = []
    for n, row in numbered_objects(text.splitlines(), path, "an object with id, title, text"):
        missing = [
            k for k in ("id", "text") if not isinstance(row.get(k), str | int) or str(row.get(k)) == ""
        ]
        if missing:
            raise InputError(f"{path}:{n}: missing or empty field(s) {missing} (expected id, title, text)")
        if not isinstance(row["text"], str):
            raise InputError(f"{path}:{n}: 'text' must be a string")
        title = row.get("title") or ""
        if not isinstance(title, str):
            raise InputError(f"{path}:{n}: 'title' must be a string")
        trust = _trust(row.get("trust"), f"{path}:{n}")
        if row["text"].strip():
            docs.append(
                SourceDocument(
                    id=str(row["id"]), title=title, text=row["text"].strip(), source=source, trust=trust
                )
            )
    return docs


def _trust(value: object, where: str) -> float | None:
    """A row's "trust": absent or null, or a number in [0, 1]."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= float(value) <= 1.0:
        raise InputError(f"{where}: 'trust' must be a number from 0 to 1, got {value!r}")
    return float(value)


class _TextExtractor(HTMLParser):
    _SKIP = frozenset({"script", "style", "noscript", "template"})
    _BLOCK = frozenset(
        {"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "section", "article", "title"}
    )

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self._SKIP:
            self._skip += 1
        elif tag in self._BLOCK:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in self._SKIP and self._skip:
            self._skip -= 1
        elif tag in self._BLOCK:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.parts.append(data)


def html_to_text(html: str) -> str:
    parser = _TextExtractor()
    parser.feed(html)
    parser.close()
    lines = (" ".join(line.split()) for line in "".join(parser.parts).splitlines())
    return "\n".join(line for line in lines if line)
