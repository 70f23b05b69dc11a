"""Templates for the bundled reasoning prompts (math, code, science), written for specsweep.

Each template is filled from a seeded random generator, so the set is the same on every build.
"""

from __future__ import annotations

import random

MATH = [
    "A tank holds {a} litres. It drains at {b} L/min while a pump refills it at {c} L/min. "
    "Starting full, when is it half empty? Then: how fast must the pump run to keep it at {d}%?",
    "Find the number of lattice points (x, y) with x^2 + y^2 <= {a}. Explain how you count "
    "them without listing every point.",
    "A bag has {a} red, {b} blue and {c} green marbles. Three are drawn without replacement. "
    "What is the probability that all three colours appear? Give an exact fraction.",
    "Compute {a}^{b} mod {c} by hand, showing each squaring step, and check the result "
    "with Fermat's little theorem or Euler's theorem where it applies.",
    "The sequence a_1 = {a}, a_(n+1) = {b} a_n - {c} is defined for n >= 1. Find a closed "
    "form for a_n and the first n with a_n > 10^6.",
    "A rectangle has perimeter {a} and its diagonal is {b}. Find its sides, or prove that no "
    "such rectangle exists.",
    "In how many ways can {a} identical books be placed on {b} distinct shelves so that no "
    "shelf holds more than {c}? Derive the count with inclusion-exclusion.",
    "Solve the system {a}x + {b}y = {c}, {d}x - {b}y = {a} over the rationals, then say for "
    "which integer values of the right-hand sides the solution is integral.",
    "A loan of {a}00 is repaid in {b} equal monthly payments at {c}% yearly interest "
    "compounded monthly. Derive the payment formula and compute the payment.",
    "Two runners start together on a {a} m circular track at {b} m/s and {c} m/s. When do "
    "they first meet again, and how many times do they pass in the first hour?",
    "Find all real x with |x - {a}| + |x + {b}| = {c}. Sketch the case analysis.",
    "What is the expected number of rolls of a fair {a}-sided die until every face has "
    "appeared at least once? Derive it, then approximate it for a {b}-sided die.",
]

CODE_TASKS = [
    "parses an ISO 8601 duration such as P3DT4H12M into seconds, rejecting malformed input",
    "merges k sorted iterators lazily into one sorted iterator",
    "implements an LRU cache with O(1) get and put, without an ordered-dict library",
    "finds the longest palindromic substring in O(n^2) time and O(1) extra space",
    "evaluates arithmetic expressions with + - * / and parentheses using a Pratt parser",
    "computes the edit distance of two strings and prints one optimal alignment",
    "detects a cycle in a directed graph and returns the nodes of one cycle",
    "rate-limits calls with a token bucket that is safe under concurrent callers",
    "serialises a binary tree to a string and parses it back",
    "counts inversions in an array with merge sort",
    "implements a trie with insert, prefix search and deletion that frees empty nodes",
    "splits a log file into sessions separated by more than 30 minutes of silence",
    "solves Sudoku by constraint propagation and backtracking",
    "computes the median of a stream of numbers with two heaps",
    "checks whether a string of brackets of four kinds is balanced and reports the first error",
    "topologically sorts build targets and reports a dependency cycle by name",
    "implements consistent hashing with virtual nodes and measures the load spread",
    "finds the k most frequent words in a large text file with bounded memory",
    "retries an HTTP call with exponential backoff and jitter, honouring Retry-After",
    "diffs two lists of records by key and prints added, removed and changed fields",
    "implements a ring buffer that overwrites the oldest entry when full",
    "computes shortest paths with Dijkstra's algorithm and reconstructs the path",
    "parses CSV with quoted fields, embedded newlines and escaped quotes",
    "implements a bloom filter and picks its size from a target false-positive rate",
    "renders a table of rows as aligned plain text with column widths from the data",
    "computes percentiles p50/p90/p99 exactly and with a t-digest-like sketch",
    "walks a directory tree and finds duplicate files by size then by hash",
    "implements a minimal regular-expression matcher supporting . * ? and anchors",
]
LANGUAGES = ["Python", "Rust", "Go", "TypeScript", "C++"]
CODE_ASKS = [
    "Write a {lang} function that {task}. Explain the complexity and give three tests.",
    "In {lang}, implement code that {task}. Discuss the edge cases before writing it.",
]

SCIENCE_WHY = [
    "the sky is darker blue overhead than near the horizon on a clear day",
    "ice skates glide, and how much pressure melting really contributes",
    "a fever can help the body fight an infection, and when it stops helping",
    "stainless steel resists rust while ordinary steel does not",
    "the Moon always shows the same face to the Earth",
    "bread dough rises and why salt slows it down",
    "high-voltage lines transmit power with less loss than low-voltage ones",
    "a siphon works, and whether it would work in a vacuum",
    "antibiotic resistance spreads faster in hospitals than elsewhere",
    "noise-cancelling headphones work better on low frequencies than high ones",
    "a bicycle is stable at speed, and what the trail of the fork does",
    "the boiling point of water falls with altitude, and by how much per kilometre",
    "lithium-ion batteries lose capacity faster when kept fully charged and warm",
    "some stars end as white dwarfs and others as neutron stars",
    "enzymes lose their activity above a certain temperature",
    "a prism splits white light, and why the red end bends least",
    "coastal climates have smaller temperature swings than inland ones",
    "vaccines need booster doses for some diseases but not for others",
    "a GPU runs matrix multiplication faster than a CPU of similar power",
    "earthquakes produce both P and S waves, and why S waves do not cross the outer core",
]
SCIENCE_NUMERIC = [
    "A {a} kg box slides down a {b} degree slope with friction coefficient 0.{c}. Find its "
    "acceleration and the distance it travels in {d} s from rest.",
    "How much energy is needed to heat {a} litres of water from {b} C to boiling and boil a "
    "tenth of it away? Compare it with a {c} W kettle's running time.",
    "A radioactive sample loses {a}% of its activity in {b} days. Find its half-life and "
    "the fraction left after {c} days.",
    "A satellite orbits {a}00 km above the Earth. Find its period and speed, and the extra "
    "speed needed to escape from that orbit.",
    "{a} g of sodium bicarbonate reacts with excess acetic acid. How many litres of CO2 form "
    "at 25 C and 1 atm? Show the balanced equation.",
    "A lens of focal length {a} cm forms an image of an object {b} cm away. Where is the "
    "image, how large is it, and is it real or virtual?",
    "A population of bacteria doubles every {a} minutes with unlimited food. With a carrying "
    "capacity of 10^{b} cells, when does the logistic model reach half of it from 10^3?",
    "A {a} ohm and a {b} ohm resistor are in parallel, in series with {c} ohm, across 12 V. "
    "Find every current and the power each resistor dissipates.",
]


def reasoning(rng: random.Random) -> list[dict[str, str]]:
    out = []

    def n(lo: int, hi: int) -> int:
        return rng.randint(lo, hi)

    for k, template in enumerate(MATH):
        for j in range(4):
            text = template.format(a=n(3, 90), b=n(2, 30), c=n(2, 40), d=n(10, 90))
            out.append({"id": f"math-t{k:02d}-{j}", "category": "math", "prompt": text})
    for k, task in enumerate(CODE_TASKS):
        lang = LANGUAGES[k % len(LANGUAGES)]
        ask = CODE_ASKS[k % len(CODE_ASKS)]
        out.append(
            {"id": f"code-t{k:02d}", "category": "code", "prompt": ask.format(lang=lang, task=task)}
        )
    for k, why in enumerate(SCIENCE_WHY):
        out.append(
            {
                "id": f"science-w{k:02d}",
                "category": "science",
                "prompt": f"Explain why {why}. Reason from first principles, then give numbers.",
            }
        )
    for k, template in enumerate(SCIENCE_NUMERIC):
        for j in range(3):
            text = template.format(a=n(2, 60), b=n(5, 45), c=n(2, 9), d=n(2, 9))
            out.append({"id": f"science-n{k:02d}-{j}", "category": "science", "prompt": text})
    return out
