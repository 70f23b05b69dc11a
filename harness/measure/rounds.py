"""Multi-round users: each steady-state slot holds a conversation that grows round by round.

With `benchmark.rounds` R > 1 each of the C slots of a steady-state run (`harness.measure.steady`)
is a user, as in SGLang's own HiCache benchmark (benchmark/hicache/bench_multiturn.py: N clients, R
rounds each, the answer appended to the history with the next user turn). A user's round 1 is the
next prompt of the run's segment (`harness.measure.prompt_plan`) as the workload gives it. Round k
+ 1 is round k's messages, then the assistant's answer as it was streamed (its content: a chat
template drops earlier turns' reasoning), then the next user turn: the last user message of the
segment's next prompt (a follow-up question; the bundled conversations have no later turns to draw
on). After round R, or a request that did not complete (failed, aborted, cut), the slot starts a new
user.

Every request, round 1 or a follow-up, takes one prompt of the run's own segment, so a run sends
as many prompts as with R = 1: runs stay disjoint and run r takes the same prompts in every trial.
Which follow-up a user gets depends on the order the slots finish, so pairing is by segment, not
request by request.

`benchmark.users` U >= C conversations are open at once (default C: each slot its own user, who
comes back at once). With U > C a user whose round ended waits behind the others, least recently
served first, as bench_multiturn's clients queue for its request rate: its history then sits idle
in the radix cache, is evicted from the GPU when the U histories outgrow the KV pool, and is
recomputed in its next round unless HiCache's host tier kept it (docs/benchmark.md).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator

from harness.measure.timeline import Timeline
from harness.workload import Prompt

__all__ = ["Users", "follow_up"]


def _last_user_turn(prompt: Prompt) -> dict[str, str]:
    users = [m for m in prompt.messages if m.get("role") == "user"]
    return {"role": "user", "content": (users[-1] if users else prompt.messages[-1])["content"]}


def follow_up(previous: Prompt, answer: str, turn: Prompt) -> Prompt:
    """Round k + 1 of `previous`'s user: its messages, the answer, then `turn`'s question."""
    messages = (*previous.messages, {"role": "assistant", "content": answer}, _last_user_turn(turn))
    head = previous.id.split("#", 1)[0]
    return Prompt(f"{head}#{previous.round + 1}", messages, previous.category, previous.round + 1)


class Users:
    """The prompts of one steady-state run: `users` conversations of `rounds` rounds, served by
    the run's slots least recently served first (rounds 1: the source's prompts as they come)."""

    def __init__(self, source: Iterator[Prompt], rounds: int, users: int = 0):
        self.source = source
        self.rounds = rounds
        self.users = users  # the conversations open at once (in flight or waiting); 0: the slots
        self.open = 0
        self.waiting: deque[tuple[Prompt, str]] = deque()  # (a user's last prompt, its answer)

    def next(self) -> Prompt:
        """The next request a free slot sends: a new user's first round while fewer than `users`
        are open (or none waits), else the longest-waiting user's next round."""
        fresh = next(self.source)
        if self.open < self.users or not self.waiting:
            self.open += 1
            return fresh
        previous, answer = self.waiting.popleft()
        return follow_up(previous, answer, fresh)

    def answered(self, prompt: Prompt, line: Timeline) -> None:
        """`prompt`'s request ended: its user waits for its next round if it completed with
        rounds to go, else leaves (a new user takes its place)."""
        if self.rounds > 1 and line.record.ok and prompt.round < self.rounds and line.answer:
            self.waiting.append((prompt, line.answer))
        else:
            self.open -= 1
