"""More reasoning prompts, so that a run at 64 in flight never sends another run's prompts.

A steady-state run at concurrency C sends 2C + window - 1 requests (191 at 64); the default
benchmark (2 warm-up + 5 runs) then needs 957 prompts of its own, and the first reasoning set
held 180. These are drawn from the same kinds of task as `workload_reasoning` (math with new
numbers, each coding task in the other languages and phrasings, science asked another way, and
logic puzzles, which the first set had only 13 of), from a generator of their own
(`SEED_MORE`), so the first 180 prompts and the other bundled files build exactly as before.
"""

from __future__ import annotations

import random

from workload_reasoning import CODE_ASKS, CODE_TASKS, LANGUAGES, MATH, SCIENCE_NUMERIC, SCIENCE_WHY

SEED_MORE = 64
MATH_DRAWS = 25  # per template (12 templates)
NUMERIC_DRAWS = 20  # per template (8 templates)
LOGIC_DRAWS = 18  # per template (6 templates)

SCIENCE_ASKS = [
    "A student says that {why} is obvious. Explain the mechanism carefully, say what the "
    "student's intuition gets wrong, and estimate one number that matters.",
    "Design a simple experiment that shows why {why}. What would you measure, what result do "
    "you expect, and what could fool you?",
    "Explain to a twelve-year-old why {why}, then give the full explanation an undergraduate "
    "would need, with the key equation.",
]

LOGIC = [
    "On an island, knights always tell the truth and knaves always lie. {a} people stand in a "
    "row; person k says 'at least k of us are knaves'. Who is what? Justify every case.",
    "{a} people sit around a round table. Each shakes hands with everyone except their two "
    "neighbours and one person opposite when there is one. How many handshakes happen? Reason "
    "it out, then check a small case by hand.",
    "A clock gains {b} minutes every hour. It is set right at noon. When does it next show the "
    "right time, and what time does it show when the true time is {c}:00 the next day?",
    "You have {a} coins, one of which is counterfeit and lighter or heavier, you do not know "
    "which. What is the fewest weighings on a balance that always finds it and tells which? "
    "Give the strategy.",
    "A schedule must place {a} meetings in {b} rooms over one day. Meetings i and i+1 share an "
    "attendee, and meeting 1 shares one with meeting {a}. What is the fewest time slots needed? "
    "Prove that fewer cannot work.",
    "Four friends each tell one lie and one truth about the top three of a race of {a} "
    "runners. Build a small set of such statements with a unique answer, then solve it step by "
    "step.",
]


def reasoning_more(rng: random.Random) -> list[dict[str, str]]:
    out: list[dict[str, str]] = []

    def n(lo: int, hi: int) -> int:
        return rng.randint(lo, hi)

    for k, template in enumerate(MATH):
        for j in range(MATH_DRAWS):
            text = template.format(a=n(3, 120), b=n(2, 40), c=n(2, 60), d=n(10, 90))
            out.append({"id": f"math-m{k:02d}-{j:02d}", "category": "math", "prompt": text})
    for k, task in enumerate(CODE_TASKS):
        first = (LANGUAGES[k % len(LANGUAGES)], CODE_ASKS[k % len(CODE_ASKS)])  # in the first set
        others = [(lang, ask) for lang in LANGUAGES for ask in CODE_ASKS if (lang, ask) != first]
        for j, (lang, ask) in enumerate(others):
            text = ask.format(lang=lang, task=task)
            out.append({"id": f"code-m{k:02d}-{j}", "category": "code", "prompt": text})
    for k, why in enumerate(SCIENCE_WHY):
        for j, ask in enumerate(SCIENCE_ASKS):
            text = ask.format(why=why)
            out.append({"id": f"science-a{k:02d}-{j}", "category": "science", "prompt": text})
    for k, template in enumerate(SCIENCE_NUMERIC):
        for j in range(NUMERIC_DRAWS):
            text = template.format(a=n(2, 90), b=n(5, 60), c=n(2, 9), d=n(2, 9))
            out.append({"id": f"science-m{k:02d}-{j:02d}", "category": "science", "prompt": text})
    for k, template in enumerate(LOGIC):
        for j in range(LOGIC_DRAWS):
            text = template.format(a=n(5, 40), b=n(2, 9), c=n(3, 11))
            out.append({"id": f"logic-m{k:02d}-{j:02d}", "category": "logic", "prompt": text})
    return out


def distinct(records: list[dict[str, str]], seen: set[str]) -> list[dict[str, str]]:
    """The records whose text is not in `seen` (nor earlier in `records`): a draw of the same
    numbers twice is one prompt, not two."""
    out = []
    for record in records:
        if record["prompt"] not in seen:
            seen.add(record["prompt"])
            out.append(record)
    return out
