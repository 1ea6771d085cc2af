"""Drive Open WebUI, a chat UI people already use, against a running ragmend in a real browser
(Debian's chromium, headless, through selenium): a three-turn conversation, then a screenshot.

Run by scripts/demo_chat.sh (`make demo-chat`), which installs Open WebUI in its own venv and
starts both servers. Not part of the test suite: it needs the UI's venv and the browser, and one
run takes minutes on 2 CPU cores (each turn is a CPU generation, diagnosis and maybe a repair).
"""

from __future__ import annotations

import argparse
import re
import sys
import time
import urllib.request
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver

TURNS = (
    "Andrew Jaspan was the co-founder of what not-for-profit media outlet?",
    "When did it launch?",
    "How many people does it reach?",
)
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


def wait_for_answer(ragmend: str, timeout: float) -> None:
    """Until ragmend took the request and finished it (the UI streams, then renders the end)."""
    deadline = time.monotonic() + timeout
    started = False
    while time.monotonic() < deadline:
        busy = in_flight(ragmend) > 0
        started = started or busy
        if started and not busy:
            time.sleep(3)  # the last chunk (the diagnosis) and the UI's re-render
            return
        time.sleep(0.5)
    raise TimeoutError(f"no answer from ragmend within {timeout:.0f} s")


def browser() -> WebDriver:
    options = webdriver.ChromeOptions()
    for flag in CHROME_FLAGS:
        options.add_argument(flag)
    options.binary_location = "/usr/bin/chromium"
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


def converse(driver: WebDriver, ui: str, ragmend: str, turns: tuple[str, ...], timeout: float) -> list[str]:
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
        wait_for_answer(ragmend, timeout)
        replies = driver.find_elements(By.CSS_SELECTOR, "#response-content-container")
        print(f"ragmend: {replies[-1].text if replies else '(no reply rendered)'}", flush=True)
    return [r.text for r in driver.find_elements(By.CSS_SELECTOR, "#response-content-container")]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ui", default="http://127.0.0.1:8080")
    parser.add_argument("--ragmend", default="http://127.0.0.1:8000")
    parser.add_argument("--out", type=Path, default=Path("docs/img/demo-chat.png"))
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per turn")
    args = parser.parse_args(argv)
    driver = browser()
    try:
        replies = converse(driver, args.ui, args.ragmend, TURNS, args.timeout)
        driver.execute_script("window.scrollTo(0, 0);")
        args.out.parent.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(args.out))
    finally:
        driver.quit()
    if len(replies) != len(TURNS) or not all(replies):
        print(f"expected {len(TURNS)} replies, the page shows {len(replies)}", file=sys.stderr)
        return 1
    print(f"screenshot: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
