#!/usr/bin/env bash
# `make demo-chat`: Open WebUI (a chat UI people already use) pointed at ragmend, a three-turn
# conversation held in Debian's chromium (headless, selenium), a screenshot in docs/img/.
# Open WebUI lives in its own venv (var/openwebui/venv; it pins its own FastAPI, pydantic and
# more); its state in a fresh temporary folder each run. Needs root (or sudo) once for chromium.
set -euo pipefail
cd "$(dirname "$0")/.."
UI_VENV=${OPENWEBUI_VENV:-var/openwebui/venv}
RAGMEND_PORT=${RAGMEND_PORT:-8000}
UI_PORT=${UI_PORT:-8080}
IMG=${IMG:-docs/img}
LOGS=var/openwebui
mkdir -p "$LOGS"

if [ ! -x "$UI_VENV/bin/open-webui" ]; then
  echo "installing Open WebUI 0.12.4 into $UI_VENV (a few minutes)"
  python3 -m venv "$UI_VENV"
  "$UI_VENV/bin/pip" install -q --upgrade pip
  "$UI_VENV/bin/pip" install -q "torch==2.13.0"  # the CPU wheel; otherwise a CUDA build of GBs
  "$UI_VENV/bin/pip" install -q "open-webui==0.12.4" "selenium>=4.20"
fi
if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
  if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo -n"; fi
  $sudo apt-get install -y -q chromium chromium-driver
fi

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
wait_for() {  # url, seconds
  for _ in $(seq "$2"); do curl -sf -o /dev/null "$1" && return 0; sleep 1; done
  echo "$1 did not answer in $2 s" >&2; return 1
}

if ! curl -sf -o /dev/null "http://127.0.0.1:$RAGMEND_PORT/readyz"; then
  .venv/bin/ragmend serve --host 127.0.0.1 --port "$RAGMEND_PORT" >"$LOGS/ragmend.log" 2>&1 &
  pids+=($!)
  wait_for "http://127.0.0.1:$RAGMEND_PORT/readyz" 600
fi

data=$(mktemp -d)
# Open WebUI signs its sessions with WEBUI_SECRET_KEY; without one it writes .webui_secret_key into
# its working directory (this checkout). A fresh key each run, as its state is fresh each run.
secret=$(python3 -c "import secrets; print(secrets.token_hex(32))")
# The connection sends each reply's message id (OPENAI_API_CONFIGS' header), which ragmend keeps
# with the answer, so a rating synced from Open WebUI finds it; API keys on, so the sync can use
# an admin's key. No hub here: Open WebUI's own document search cannot load its embedding model (it logs the
# error and serves chat). Its side calls (titles, tags, follow-up suggestions) are off: each would
# be a whole RAG request to ragmend. Its built-in tools are off: ragmend refuses `tools` (400).
env DATA_DIR="$data" WEBUI_SECRET_KEY="$secret" OFFLINE_MODE=true HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
  WEBUI_AUTH=False ENABLE_OLLAMA_API=False ENABLE_OPENAI_API=True \
  OPENAI_API_BASE_URL="http://127.0.0.1:$RAGMEND_PORT/v1" OPENAI_API_KEY=none \
  OPENAI_API_CONFIGS='{"0": {"headers": {"X-OpenWebUI-Message-Id": "{{MESSAGE_ID}}"}}}' \
  ENABLE_API_KEYS=True \
  ENABLE_TITLE_GENERATION=False ENABLE_TAGS_GENERATION=False ENABLE_FOLLOW_UP_GENERATION=False \
  ENABLE_AUTOCOMPLETE_GENERATION=False ENABLE_SEARCH_QUERY_GENERATION=False \
  ENABLE_RETRIEVAL_QUERY_GENERATION=False ENABLE_EVALUATION_ARENA_MODELS=False \
  ENABLE_VERSION_UPDATE_CHECK=False RAG_EMBEDDING_MODEL_AUTO_UPDATE=False \
  DEFAULT_MODEL_METADATA='{"capabilities": {"builtin_tools": false}}' \
  DEFAULT_MODEL_PARAMS='{"function_calling": "legacy"}' \
  ANONYMIZED_TELEMETRY=False DO_NOT_TRACK=True SCARF_NO_ANALYTICS=True \
  "$UI_VENV/bin/open-webui" serve --host 127.0.0.1 --port "$UI_PORT" >"$LOGS/webui.log" 2>&1 &
pids+=($!)
wait_for "http://127.0.0.1:$UI_PORT/" 300

"$UI_VENV/bin/python" scripts/demo_chat.py --ui "http://127.0.0.1:$UI_PORT" \
  --ragmend "http://127.0.0.1:$RAGMEND_PORT" --img "$IMG"
