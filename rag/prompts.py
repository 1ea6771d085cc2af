"""Prompt templates are data (prompts.yaml); this module only loads and fills them."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

import yaml

from ragmend.errors import InputError

PROMPTS_FILE = Path(__file__).with_name("prompts.yaml")


@dataclass(frozen=True, kw_only=True)
class PromptTemplate:
    name: str
    description: str
    system: str
    user: str
    answer: bool = False  # a request may choose it for its answer

    def messages(self, **values: str) -> list[dict[str, str]]:
        return [
            {"role": "system", "content": self.system.format(**values)},
            {"role": "user", "content": self.user.format(**values)},
        ]


@cache
def load_prompts(path: Path = PROMPTS_FILE) -> dict[str, PromptTemplate]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    return {
        name: PromptTemplate(
            name=name,
            description=spec.get("description", ""),
            system=spec["system"],
            user=spec["user"],
            answer=bool(spec.get("answer")),
        )
        for name, spec in data.items()
    }


def answer_messages(
    template: PromptTemplate, instructions: str | None, focus: bool = False, **values: str
) -> list[dict[str, str]]:
    """An answer prompt's messages; a chat's style instructions (its system or developer
    messages) go after the template's own system message, whose grounding rule stays first.
    `focus`: the evidence is the most relevant sentences, best first (the focus repair), and the
    user message says so before it asks."""
    messages = template.messages(**values)
    if focus:
        messages[1]["content"] = f"{get_prompt('focus').user}\n\n{messages[1]['content']}"
    if instructions and instructions.strip():
        note = get_prompt("instructions").system.format(instructions=instructions.strip())
        messages[0]["content"] = f"{messages[0]['content']}\n\n{note}"
    return messages


def answer_prompt_names() -> list[str]:
    """The prompts a request may choose for its answer (`answer: true` in prompts.yaml): the others
    are ragmend's own calls (condensing a follow-up, rewriting a query), filled with other values."""
    return sorted(name for name, t in load_prompts().items() if t.answer)


def answer_prompt(name: str) -> PromptTemplate:
    """An answer prompt by name; InputError naming the answer prompts for any other."""
    if name not in answer_prompt_names():
        raise InputError(f"unknown answer prompt '{name}'; known: {answer_prompt_names()}")
    return load_prompts()[name]


def get_prompt(name: str) -> PromptTemplate:
    prompts = load_prompts()
    if name not in prompts:
        raise InputError(f"unknown prompt variant '{name}'; known: {sorted(prompts)}")
    return prompts[name]
