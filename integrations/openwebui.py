"""Open WebUI's thumbs as ragmend's votes: the ratings its users give are read from its admin API
and posted to ragmend's POST /v1/feedback, where they teach the policy (`ragmend feedback sync`).

Open WebUI keeps a rating under the id of the message it rated (`meta.message_id`); ragmend
keeps each answer under the message id Open WebUI sent with the request (a connection header set
to `{{MESSAGE_ID}}`, read from server.message_id_header), so a rating finds its answer.

    ratings = OpenWebUIRatings("http://127.0.0.1:8080", api_key=admin_key)
    votes = RagmendVotes("http://127.0.0.1:8000", api_key=None)
    report = sync(ratings, votes, SyncState(Path("var/openwebui-sync.json")))

Each sync reads the ratings changed since the last one (Open WebUI's `updated_at`), all of them
before it posts any, then posts them oldest first. A vote ragmend already has changes nothing (a
second sync of the same ratings changes nothing); a rating changed in Open WebUI after ragmend
learned it is refused by ragmend's one-vote rule (409) and counted as `kept_first`. ragmend
takes votes only from the key that received the answer, the one Open WebUI's connection sends,
and at most server.feedback_votes_per_min a minute from it (past them the sync stops). The state
(how far the sync has read) is written atomically after each rating ragmend answered, so a sync
stopped by an error resumes where it stopped and applies nothing twice.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import httpx

from ragmend.errors import ConfigError, InputError, PeerUnavailable
from ragmend.fileio import atomic_write_json

RATINGS_PAGE = "/api/v1/evaluations/feedbacks/list"  # an admin's paginated list, 30 a page
MAX_PAGES = 10_000  # of one read: a peer that pages forever must not hold the sync
LOOPBACK = frozenset({"localhost", "127.0.0.1", "::1"})
Outcome = Literal["voted", "already", "kept_first", "unknown", "expired"]
# ragmend's answers to a vote that are not errors of the sync (policy/feedback.py's rules).
REFUSALS: dict[int, Outcome] = {404: "unknown", 409: "kept_first", 410: "expired"}


@dataclass(frozen=True, kw_only=True)
class Rating:
    """One Open WebUI rating of a message: thumbs up (score 1) or down (score 0)."""

    id: str  # Open WebUI's feedback id
    message_id: str
    score: float
    comment: str | None
    updated_at: int  # unix seconds

    @classmethod
    def of(cls, item: dict[str, Any]) -> Rating | None:
        """The rating in one of Open WebUI's feedback items; None for an item that is not a
        thumbs rating of a message."""
        data, meta = item.get("data") or {}, item.get("meta") or {}
        thumbs = {1: 1.0, -1: 0.0}.get(_integer(data.get("rating")) or 0)
        message_id = meta.get("message_id")
        if item.get("type") != "rating" or thumbs is None or not message_id:
            return None
        said = [str(data[k]).strip() for k in ("reason", "comment") if data.get(k)]
        return cls(
            id=str(item["id"]),
            message_id=str(message_id),
            score=thumbs,
            comment=": ".join(said) or None,
            updated_at=int(item["updated_at"]),
        )


def _integer(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


class _Peer:
    """One HTTP service the sync talks to, its errors said in the sync's words."""

    def __init__(self, name: str, base_url: str, api_key: str | None, timeout_s: float, key_hint: str):
        self.name = name
        self.base_url = base_url.rstrip("/")
        url = httpx.URL(self.base_url)
        if api_key and url.scheme != "https" and url.host not in LOOPBACK:
            raise ConfigError(
                f"{name} at {self.base_url}: refusing to send a key over plain http to another host "
                "(anyone on the path could read it); use https"
            )
        self.key_hint = key_hint
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout_s)

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.HTTPError as e:
            raise PeerUnavailable(f"{self.name} at {self.base_url} cannot be reached ({e})") from e
        if response.status_code in (401, 403):
            raise ConfigError(
                f"{self.name} at {self.base_url} refused the key (HTTP {response.status_code}): "
                f"{self.key_hint}"
            )
        return response

    def failed(self, response: httpx.Response) -> PeerUnavailable:
        return PeerUnavailable(
            f"{self.name} at {self.base_url} answered {response.request.method} {response.request.url.path} "
            f"with HTTP {response.status_code}: {response.text[:300]}"
        )

    def close(self) -> None:
        self._http.close()


class OpenWebUIRatings:
    """The ratings of an Open WebUI, read with an admin's key (its API key or a session token)."""

    def __init__(self, base_url: str, api_key: str | None, timeout_s: float = 30.0):
        hint = "the sync reads every user's ratings, which takes an admin's key (OPENWEBUI_API_KEY)"
        self._peer = _Peer("Open WebUI", base_url, api_key=api_key, timeout_s=timeout_s, key_hint=hint)

    @property
    def base_url(self) -> str:
        return self._peer.base_url

    def changed_since(self, cursor: int) -> list[dict[str, Any]]:
        """Every feedback item updated at `cursor` or later, oldest first (the list is read newest
        first, page by page, until a page reaches back past the cursor)."""
        items: list[dict[str, Any]] = []
        page = 1
        while True:
            params = {"order_by": "updated_at", "direction": "desc", "page": page}
            response = self._peer.request("GET", RATINGS_PAGE, params=params)
            if response.status_code != 200:
                raise self._peer.failed(response)
            batch = _items(response, self._peer)
            items += [item for item in batch if int(item.get("updated_at", 0)) >= cursor]
            if not batch or min(int(item.get("updated_at", 0)) for item in batch) < cursor:
                break
            page += 1
            if page > MAX_PAGES:
                raise PeerUnavailable(
                    f"{self._peer.name} at {self.base_url} kept paging past {MAX_PAGES} pages of ratings "
                    "changed since the last sync; stopped (nothing was voted from this read)"
                )
        return sorted(items, key=lambda item: (int(item.get("updated_at", 0)), str(item.get("id"))))

    def close(self) -> None:
        self._peer.close()


def _items(response: httpx.Response, peer: _Peer) -> list[dict[str, Any]]:
    try:
        body = response.json()
        items = body["items"]
        assert isinstance(items, list)
    except (ValueError, KeyError, TypeError, AssertionError) as e:
        raise PeerUnavailable(
            f"{peer.name} at {peer.base_url}: {RATINGS_PAGE} did not return its list of feedback items "
            f"({response.text[:200]})"
        ) from e
    return items


class RagmendVotes:
    """ragmend's POST /v1/feedback, naming each answer by the client's message id."""

    def __init__(self, base_url: str, api_key: str | None, timeout_s: float = 30.0):
        hint = (
            "give the key of server.api_keys that Open WebUI's connection to ragmend uses "
            "(RAGMEND_API_KEY): a vote counts only from the key that received the answer"
        )
        self._peer = _Peer("ragmend", base_url, api_key=api_key, timeout_s=timeout_s, key_hint=hint)

    def vote(self, rating: Rating) -> Outcome:
        body: dict[str, Any] = {"message_id": rating.message_id, "score": rating.score}
        if rating.comment:
            body["comment"] = rating.comment[:4000]
        response = self._peer.request("POST", "/v1/feedback", json=body)
        if response.status_code == 200:
            return "voted" if response.json().get("recorded") else "already"
        if response.status_code in REFUSALS:
            return REFUSALS[response.status_code]
        if response.status_code == 429:
            raise PeerUnavailable(
                f"ragmend at {self._peer.base_url} takes at most server.feedback_votes_per_min votes a "
                f"minute from one key: this sync stopped here and the next one goes on from this rating "
                f"(Retry-After: {response.headers.get('retry-after', '?')} s)"
            )
        if response.status_code == 400:
            refused = response.text[:300]
            raise InputError(f"ragmend refused the vote for Open WebUI rating {rating.id}: {refused}")
        raise self._peer.failed(response)

    def close(self) -> None:
        self._peer.close()


@dataclass
class SyncState:
    """How far the sync has read one Open WebUI's ratings: the newest `updated_at` it finished and
    the ratings of that very second it finished (a later one of the same second is still read)."""

    path: Path
    cursors: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path) -> SyncState:
        if not path.exists():
            return cls(path)
        try:
            cursors = json.loads(path.read_text(encoding="utf-8"))
            assert isinstance(cursors, dict)
        except (ValueError, AssertionError) as e:
            raise ConfigError(f"{path}: not the sync's state ({e}); move it aside to start afresh") from e
        return cls(path, cursors)

    def cursor(self, url: str) -> tuple[int, set[str]]:
        at = self.cursors.get(url, {})
        return int(at.get("updated_at", 0)), set(at.get("done", []))

    def advance(self, url: str, item: dict[str, Any]) -> None:
        second = int(item.get("updated_at", 0))
        cursor, done = self.cursor(url)
        done = done | {str(item["id"])} if second == cursor else {str(item["id"])}
        self.cursors[url] = {"updated_at": max(second, cursor), "done": sorted(done)}
        atomic_write_json(self.path, self.cursors)


@dataclass
class SyncReport:
    """What one sync did, by what ragmend said of each rating."""

    read: int = 0  # feedback items changed since the last sync
    not_ratings: int = 0  # items that are no thumbs rating of a message
    outcomes: dict[str, int] = field(default_factory=dict)

    def count(self, outcome: Outcome) -> None:
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1

    def as_dict(self) -> dict[str, Any]:
        counts: dict[str, int] = {o: self.outcomes.get(o, 0) for o in REPORTED}
        return {"read": self.read, "not_ratings": self.not_ratings, **counts}


REPORTED: tuple[Outcome, ...] = ("voted", "already", "kept_first", "unknown", "expired")


def sync(ratings: OpenWebUIRatings, votes: RagmendVotes, state: SyncState) -> SyncReport:
    """Post every rating changed since the last sync as a vote (module docstring)."""
    cursor, done = state.cursor(ratings.base_url)
    fresh = [
        item
        for item in ratings.changed_since(cursor)
        if not (int(item.get("updated_at", 0)) == cursor and str(item.get("id")) in done)
    ]
    report = SyncReport(read=len(fresh))
    for item in fresh:
        rating = Rating.of(item)
        if rating is None:
            report.not_ratings += 1
        else:
            report.count(votes.vote(rating))
        state.advance(ratings.base_url, item)
    return report
