"""Drive Open WebUI, a chat UI people already use, against a running ragmend in a real browser
(Debian's chromium, headless, through selenium): a three-turn conversation; the first answer's
draft caught on the screen while the check runs (Open WebUI shows a draft stream's
reasoning_content apart from the answer); the sources opened in Open WebUI's panel; the third,
flagged, rated thumbs down; then `ragmend feedback sync` posts that rating to ragmend, and the
policy's update counts before and after it are read from ragmend's metrics. Screenshots in
docs/img/.

Run by scripts/demo_chat.sh (`make demo-chat`), which installs Open WebUI in its own venv and
starts both servers. Not part of the test suite: it needs the UI's venv and the browser, and one
run takes minutes on 2 CPU cores (each turn is a CPU generation, diagnosis and maybe a repair).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver

TURNS = (
    "Andrew Jaspan was the co-founder of what not-for-profit media outlet?",
    "When did it launch?",
    "Who won the 2026 Tour de France?",  # outside the corpus: the diagnosis flags it
)
# The line leading a draft stream's reasoning (server/openai_api.py DRAFT_HEADING; this script runs
# in Open WebUI's venv, without ragmend): never part of an answer the page shows.
DRAFT_HEADING = "Draft, being checked against the sources:"
# What the browser is started with: this machine has no network, so Chromium's background
# connections (updates, sync, safe browsing) are switched off instead of failing at every start.
CHROME_FLAGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1400,1300",
]


def in_flight(ragmend: str) -> float:
    """ragmend's requests in flight, read from its Prometheus endpoint."""
    with urllib.request.urlopen(f"{ragmend}/metrics", timeout=10) as r:
        text = r.read().decode()
    m = re.search(r"^ragmend_requests_in_flight (\S+)$", text, re.M)
    return float(m.group(1)) if m else 0.0


def wait_for_answer(ragmend: str, timeout: float, while_checking: Callable[[], bool] | None = None) -> None:
    """Until ragmend took the request and finished it (the UI streams, then renders the end);
    `while_checking` is polled while the request runs, until it returns True."""
    deadline = time.monotonic() + timeout
    started = False
    while time.monotonic() < deadline:
        busy = in_flight(ragmend) > 0
        started = started or busy
        if busy and while_checking is not None and while_checking():
            while_checking = None
        if started and not busy:
            time.sleep(3)  # the last chunk (the diagnosis) and the UI's re-render
            return
        time.sleep(0.5)
    raise TimeoutError(f"no answer from ragmend within {timeout:.0f} s")


def draft_shown(driver: WebDriver, path: Path) -> Callable[[], bool]:
    """A poll that takes the screenshot once the reply being checked shows its draft."""

    def poll() -> bool:
        replies = driver.find_elements(By.CSS_SELECTOR, "#response-content-container")
        if not replies or not replies[-1].text.strip():
            return False
        # Open WebUI folds a reasoning block under "Thinking…": unfold it to show the draft.
        folds = driver.find_elements(By.XPATH, '//*[starts-with(normalize-space(text()), "Thinking")]')
        for fold in folds[-1:]:
            fold.click()
            time.sleep(1)
        screenshot(driver, path)
        for fold in folds[-1:]:  # folded again, as the user left it
            fold.click()
        return True

    return poll


def browser() -> WebDriver:
    options = webdriver.ChromeOptions()
    for flag in CHROME_FLAGS:
        options.add_argument(flag)
    options.binary_location = "/usr/bin/chromium"
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


def converse(
    driver: WebDriver, ui: str, ragmend: str, turns: tuple[str, ...], timeout: float, img: Path
) -> list[str]:
    driver.get(f"{ui}/")
    time.sleep(8)
    for button in driver.find_elements(By.XPATH, '//button[contains(., "Okay, Let\'s Go!")]'):
        button.click()  # the release notes shown on a first visit
        time.sleep(1)
    for turn in turns:
        box = driver.find_element(By.ID, "chat-input")
        box.click()
        box.send_keys(turn)
        box.send_keys(Keys.ENTER)
        print(f"user: {turn}", flush=True)
        # The first turn is caught while its draft streams and the check runs.
        draft = draft_shown(driver, img / "demo-chat-draft.png") if turn == turns[0] else None
        wait_for_answer(ragmend, timeout, draft)
        replies = driver.find_elements(By.CSS_SELECTOR, "#response-content-container")
        print(f"ragmend: {replies[-1].text if replies else '(no reply rendered)'}", flush=True)
    return [r.text for r in driver.find_elements(By.CSS_SELECTOR, "#response-content-container")]


def screenshot(driver: WebDriver, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(path))
    print(f"screenshot: {path}", flush=True)


def open_sources(driver: WebDriver, reply: int) -> str:
    """Open the sources of the `reply`-th answer (0-based) and its first source's panel; the
    panel's text."""
    toggles = driver.find_elements(
        By.XPATH, '//button[starts-with(@aria-label, "Toggle") and contains(@aria-label, "source")]'
    )
    if len(toggles) <= reply:
        raise RuntimeError(f"reply {reply + 1} shows no sources (found {len(toggles)} source toggles)")
    toggles[reply].click()
    time.sleep(1)
    chips = driver.find_elements(By.XPATH, '//button[starts-with(@id, "source-")]')
    if not chips:
        raise RuntimeError("the sources list did not open")
    chips[0].click()
    time.sleep(2)
    dialogs = driver.find_elements(By.CSS_SELECTOR, '[role="dialog"], .modal')
    return dialogs[-1].text if dialogs else ""


def close_panel(driver: WebDriver) -> None:
    webdriver.ActionChains(driver).send_keys(Keys.ESCAPE).perform()
    time.sleep(1)


def thumbs_down(driver: WebDriver) -> None:
    """Rate the last answer down, as a user clicks it (Open WebUI stores the rating at once)."""
    buttons = driver.find_elements(By.XPATH, '//button[@aria-label="Bad Response"]')
    if not buttons:
        raise RuntimeError("no thumbs-down button on the page")
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", buttons[-1])
    buttons[-1].click()
    time.sleep(3)


def pulls(ragmend: str) -> dict[str, float]:
    """How many updates each repair arm and each router plan has learned (ragmend's metrics)."""
    with urllib.request.urlopen(f"{ragmend}/metrics", timeout=10) as r:
        text = r.read().decode()
    found = re.findall(
        r'^ragmend_(policy_arm|router_plan)_pulls\{(?:action|plan)="([^"]+)"\} (\S+)$', text, re.M
    )
    return {f"{kind}:{name}": float(value) for kind, name, value in found}


def admin_key(ui: str) -> str:
    """An API key of Open WebUI's admin (the demo runs it without sign-in: its one user)."""

    def post(path: str, body: dict[str, str] | None, token: str | None = None) -> dict[str, str]:
        request = urllib.request.Request(
            f"{ui}{path}",
            data=json.dumps(body or {}).encode(),
            headers={
                "Content-Type": "application/json",
                **({"Authorization": f"Bearer {token}"} if token else {}),
            },
        )
        with urllib.request.urlopen(request, timeout=30) as r:
            answer: dict[str, str] = json.loads(r.read())
            return answer

    token = post("/api/v1/auths/signin", {"email": "admin@localhost", "password": "admin"})["token"]
    return post("/api/v1/auths/api_key", None, token)["api_key"]


def feedback_sync(ragmend_cli: str, ui: str, ragmend: str, key: str, state: Path) -> dict[str, int]:
    command = [
        ragmend_cli,
        "feedback",
        "sync",
        "--openwebui",
        ui,
        "--ragmend",
        ragmend,
        "--state",
        str(state),
    ]
    print("$ OPENWEBUI_API_KEY=... " + " ".join(command[1:]).replace(ragmend_cli, "ragmend"), flush=True)
    done = subprocess.run(
        command, env={**os.environ, "OPENWEBUI_API_KEY": key}, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"ragmend feedback sync failed ({done.returncode}): {done.stderr}")
    print(done.stdout.strip(), flush=True)
    report: dict[str, int] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ui", default="http://127.0.0.1:8080")
    parser.add_argument("--ragmend", default="http://127.0.0.1:8000")
    parser.add_argument("--ragmend-cli", default=".venv/bin/ragmend", help="the ragmend command")
    parser.add_argument("--img", type=Path, default=Path("docs/img"), help="where the screenshots go")
    parser.add_argument("--state", type=Path, default=Path("var/openwebui/sync.json"))
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per turn")
    args = parser.parse_args(argv)
    driver = browser()
    try:
        replies = converse(driver, args.ui, args.ragmend, TURNS, args.timeout, args.img)
        driver.execute_script("window.scrollTo(0, 0);")
        screenshot(driver, args.img / "demo-chat.png")
        panel = open_sources(driver, 0)
        print(f"source panel: {panel[:300]!r}", flush=True)
        screenshot(driver, args.img / "demo-chat-sources.png")
        close_panel(driver)
        before = pulls(args.ragmend)
        thumbs_down(driver)
        screenshot(driver, args.img / "demo-chat-flagged.png")
    finally:
        driver.quit()
    if len(replies) != len(TURNS) or not all(replies):
        print(f"expected {len(TURNS)} replies, the page shows {len(replies)}", file=sys.stderr)
        return 1
    if any(DRAFT_HEADING.strip() in r for r in replies):
        print("a draft is shown as the answer: it belongs in the reasoning block", file=sys.stderr)
        return 1
    args.state.unlink(missing_ok=True)
    key = admin_key(args.ui)
    first = feedback_sync(args.ragmend_cli, args.ui, args.ragmend, key, args.state)
    again = feedback_sync(args.ragmend_cli, args.ui, args.ragmend, key, args.state)
    after = pulls(args.ragmend)
    changed = {name: (before.get(name, 0.0), n) for name, n in after.items() if n != before.get(name, 0.0)}
    print(f"policy updates changed by the sync: {changed}", flush=True)
    if first.get("voted") != 1 or again.get("read") != 0 or not changed:
        print("expected one vote learned, and nothing more on the second sync", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
