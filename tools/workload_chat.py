"""Templates for the bundled multi-turn and data-generation prompts, written for specsweep."""

from __future__ import annotations

import random

# (first question, a short earlier answer, follow-ups): the answer is the assistant turn the
# conversation already holds; the benchmark generates the answer to the last follow-up.
CONVERSATIONS = [
    (
        "What is the difference between a process and a thread?",
        "A process has its own address space; threads share their process's memory and files, "
        "so they are cheaper to create and switch but need locks around shared data.",
        ["When would you pick processes anyway?", "How does Python's GIL change the answer?"],
    ),
    (
        "How do I choose a learning rate for fine-tuning a 7B model?",
        "Start around 1e-5 to 2e-5 for full fine-tuning and 1e-4 to 3e-4 for LoRA, warm up for a "
        "few percent of steps, and watch the loss for the first few hundred steps.",
        ["My loss spikes after 2000 steps. What should I check?", "And for a 70B model?"],
    ),
    (
        "Explain what a p-value is without jargon.",
        "It is how surprising your data would be if nothing interesting were going on; a small "
        "value means the boring explanation fits the data poorly.",
        ["So is p = 0.04 'true' and p = 0.06 'false'?", "What should I report instead?"],
    ),
    (
        "Write a SQL query for the top 3 customers by revenue per country.",
        "Use a window function: SELECT * FROM (SELECT country, customer, SUM(amount) AS rev, "
        "RANK() OVER (PARTITION BY country ORDER BY SUM(amount) DESC) AS r FROM orders GROUP BY "
        "country, customer) t WHERE r <= 3;",
        [
            "Ties give me four rows in some countries. How do I get exactly three?",
            "Rewrite it for a database without window functions.",
        ],
    ),
    (
        "Why does my Docker image take 2 GB?",
        "Usually build tools and caches stay in the final layer. Use a multi-stage build, a slim "
        "base image, and clean package caches in the same RUN step that creates them.",
        ["Show me a multi-stage Dockerfile for a Go service.", "How do I see which layer is big?"],
    ),
    (
        "What causes the seasons?",
        "The Earth's axis is tilted about 23.4 degrees, so each hemisphere gets more direct "
        "sunlight and longer days for half the orbit; distance to the Sun matters little.",
        ["Then why is perihelion in January?", "What would seasons be like with a 60 degree tilt?"],
    ),
    (
        "How does speculative decoding speed up LLM inference?",
        "A small draft model proposes several tokens; the large model verifies them in one "
        "forward pass and keeps the longest correct prefix, so each expensive pass yields more "
        "than one token while the output distribution stays the same.",
        [
            "Why does it help less at large batch sizes?",
            "How does sampling at temperature 1 change the acceptance rate?",
        ],
    ),
    (
        "Help me plan a 5 km running programme from zero.",
        "Run-walk three times a week: start with 1 minute running and 2 walking for 20 minutes, "
        "and add a minute of running per interval each week; most people reach 5 km in 8 weeks.",
        ["I get shin pain in week 3. What now?", "How do I get under 30 minutes afterwards?"],
    ),
    (
        "Translate 'the meeting has been moved to Thursday' into German and French.",
        "German: 'Das Treffen wurde auf Donnerstag verschoben.' French: 'La reunion a ete "
        "deplacee a jeudi.'",
        ["Make both more formal, for an email to a client.", "Now add an apology for the change."],
    ),
    (
        "What is a monad, in one paragraph?",
        "A monad is a way to chain computations that carry some context (possible failure, "
        "state, several results) so each step receives a plain value and the plumbing of the "
        "context is handled by the chaining operation.",
        ["Show Maybe in Python-like pseudocode.", "Is a JavaScript Promise a monad?"],
    ),
    (
        "My sourdough is dense. What am I doing wrong?",
        "Most often the starter is not active enough or the bulk ferment is too short: the dough "
        "should grow by half and feel airy before shaping.",
        ["My kitchen is 18 C. How long should bulk take?", "Can I retard it overnight instead?"],
    ),
    (
        "Explain the CAP theorem.",
        "When the network partitions, a distributed store must choose between answering every "
        "request (availability) and never returning stale data (consistency).",
        ["Where does PostgreSQL with a streaming replica fall?", "What does PACELC add?"],
    ),
    (
        "Summarise the causes of the 2008 financial crisis.",
        "Cheap credit fed a housing bubble; mortgages were packaged into securities rated safer "
        "than they were; banks were highly leveraged, so falling house prices became a run on "
        "short-term funding.",
        ["Which of these did later regulation address?", "Could it happen again with crypto?"],
    ),
    (
        "How do I prove that sqrt(2) is irrational?",
        "Suppose sqrt(2) = p/q in lowest terms. Then p^2 = 2q^2, so p is even, p = 2k, so "
        "q^2 = 2k^2 and q is even too, contradicting lowest terms.",
        [
            "Does the same proof work for sqrt(4)? Where does it fail?",
            "Generalise it to sqrt(n) for non-square n.",
        ],
    ),
    (
        "Design a URL shortener's database schema.",
        "One table: id (bigint, primary key), code (unique short string), target URL, created_at "
        "and owner; generate codes by base-62 encoding the id or a random 7-character string.",
        ["How do I count clicks without slowing redirects?", "How would you shard it at 10B URLs?"],
    ),
    (
        "What is the best way to learn a new language as an adult?",
        "Daily spaced-repetition vocabulary, lots of comprehensible input you enjoy, and "
        "speaking early with a tutor or partner, even badly.",
        ["I have 20 minutes a day. How do I split them?", "How do I stop translating in my head?"],
    ),
    (
        "Explain gradient checkpointing.",
        "It stores only some activations in the forward pass and recomputes the rest during the "
        "backward pass, trading about a third more compute for much less memory.",
        [
            "Which layers should I checkpoint in a transformer?",
            "How does it interact with tensor parallelism?",
        ],
    ),
    (
        "Write a haiku about a server outage.",
        "Pager wakes at three / the dashboards bleed into red / someone pushed on Friday",
        ["Now a limerick about the same outage.", "Now the post-mortem's summary, in prose."],
    ),
    (
        "How do vaccines train the immune system?",
        "They show it a harmless version or piece of a pathogen, so B and T cells that recognise "
        "it multiply and leave memory cells that respond fast to the real infection.",
        ["Why do mRNA vaccines not change DNA?", "Why do flu vaccines need updating every year?"],
    ),
    (
        "Give me a regex for an email address.",
        "A practical one is ^[^@\\s]+@[^@\\s]+\\.[^@\\s]+$: it rejects obvious typos without "
        "trying to implement the whole RFC.",
        ["Why not the full RFC 5322 pattern?", "How should I actually validate an address?"],
    ),
    (
        "What is the time complexity of Python's sort?",
        "Timsort: O(n log n) worst case, O(n) on already sorted or nearly sorted data, stable, "
        "with O(n) extra memory.",
        [
            "Why is it stable, and when does stability matter?",
            "Would radix sort beat it on a million 32-bit integers?",
        ],
    ),
    (
        "Why do cats purr?",
        "Purring comes from rapid twitching of the laryngeal muscles; cats purr when content but "
        "also when stressed or hurt, so it seems to be a self-soothing and social signal.",
        ["Is it true that purring helps bones heal?", "Why can't big cats purr like that?"],
    ),
    (
        "Explain what a Kubernetes pod is.",
        "The smallest unit Kubernetes schedules: one or more containers that share a network "
        "namespace and volumes and always run on the same node.",
        ["When do I put two containers in one pod?", "How does a pod get its IP address?"],
    ),
    (
        "How should I structure a PhD thesis introduction?",
        "Start with the problem and why it matters, narrow to the open question, state your "
        "contributions plainly, then map the chapters to them.",
        [
            "My contributions feel small. How do I present them honestly?",
            "How long should it be for a 150-page thesis?",
        ],
    ),
    (
        "What does 'eventual consistency' guarantee?",
        "Only that if writes stop, all replicas converge to the same value eventually; reads in "
        "between may see old values or different values on different replicas.",
        ["How do I get read-your-writes on top of it?", "Give a real bug this has caused."],
    ),
]

DATAGEN_SYSTEM = """You generate synthetic customer-support tickets for training a ticket \
classifier. Every answer is exactly one JSON object and nothing else: no prose before or after, \
no code fence.

Schema (all fields required):
- "ticket_id": a string "T-" followed by 6 digits.
- "product": the product named in the request, copied exactly.
- "channel": one of "email", "chat", "phone_transcript", "web_form".
- "customer_tone": the tone named in the request: "calm", "frustrated", "confused", \
"angry" or "polite".
- "subject": a subject line of 4 to 12 words, in the customer's voice.
- "body": the customer's message, 60 to 180 words, consistent with the tone, the product and \
the issue; it mentions at least one concrete detail (an order number, a date, an error \
message, a setting) and never contains real personal data: invent names, and use the domain \
example.com for any email address.
- "issue_category": one of "billing", "delivery", "defect", "account_access", \
"how_to", "cancellation", "feature_request", "data_privacy".
- "priority": "low", "medium", "high" or "urgent", judged from the body: urgent only when the \
customer cannot work or is losing money now.
- "language": the ISO 639-1 code of the body's language (default "en").
- "resolution_hint": one sentence an agent could act on first.

Rules:
1. Vary the writing: sentence length, typos in frustrated or angry tickets (at most two), \
British and American spelling, and the order of details. Never reuse a subject line.
2. The issue category must follow from the body alone; a reader who sees only the body must \
be able to pick it. Mixed tickets are allowed, but the category names the main request.
3. Keep the body plausible for the product: a router has firmware and a blinking light, a \
subscription has an invoice and a renewal date, a sofa has a delivery slot and fabric.
4. Priority is about impact, not tone: an angry customer asking about an invoice typo is \
"low"; a calm customer whose shop's card terminal is down is "urgent".
5. If the request asks for a language other than English, write subject and body in it and \
keep every other field in English.

Example request: product=CloudNote Pro subscription; tone=frustrated; issue=charged twice
Example answer:
{"ticket_id": "T-204981", "product": "CloudNote Pro subscription", "channel": "email", \
"customer_tone": "frustrated", "subject": "Charged twice for the same month again", "body": \
"Hi, I was billed twice on 3 March for my CloudNote Pro plan (invoice CN-88213 and CN-88214, \
both 9.99). This is the second time this year. I only have one account, registered to \
dana.k@example.com. I'd like the duplicate refunded and an explanation of why it keeps \
happening, because I am close to cancelling. Please don't send me the FAQ link again, I have \
read it.", "issue_category": "billing", "priority": "medium", "language": "en", \
"resolution_hint": "Refund invoice CN-88214 and check the account for a duplicated payment \
method."}

Example request: product=Aster 5 mesh router; tone=confused; issue=setup help
Example answer:
{"ticket_id": "T-551230", "product": "Aster 5 mesh router", "channel": "chat", \
"customer_tone": "confused", "subject": "Which light means the satellite is connected?", \
"body": "Hello, I set up the main Aster 5 unit yesterday and it works, but the second unit \
upstairs has a light that goes from orange to white and back every few seconds. The manual \
says white is good and orange is bad, so I am not sure what a blinking mix means. The app \
shows 'satellite pairing' for more than an hour now. Do I need to move it closer? It is about \
12 metres and one floor away.", "issue_category": "how_to", "priority": "low", "language": \
"en", "resolution_hint": "Ask the customer to move the satellite halfway for pairing, then back \
once the light stays white."}

Example request: product=Nordlys corner sofa; tone=angry; issue=late delivery; language=de
Example answer:
{"ticket_id": "T-730017", "product": "Nordlys corner sofa", "channel": "web_form", \
"customer_tone": "angry", "subject": "Sofa seit drei Wochen überfällig, keine Antwort", \
"body": "Ich habe das Nordlys Ecksofa am 2. Mai bestellt (Bestellung 40-55192), Lieferung war \
für den 20. Mai zugesagt. Heute ist der 10. Juni. Zweimal habe ich einen Tag Urlaub genommen, \
zweimal kam niemand. Ihre Hotline legt nach 40 Minuten Warteschleife auf. Ich will jetzt einen \
verbindlichen Termin oder mein Geld zurück.", "issue_category": "delivery", "priority": "high", \
"language": "de", "resolution_hint": "Confirm a fixed delivery slot with the carrier today and \
offer compensation for the two missed days."}
"""

PRODUCTS = [
    "Aster 5 mesh router",
    "CloudNote Pro subscription",
    "Nordlys corner sofa",
    "Pulse smartwatch S2",
    "Brightline electric kettle",
    "Ledgerly accounting app",
    "Kestrel e-bike",
    "Harbor VPN family plan",
    "Quill tablet 11",
    "Oakridge standing desk",
    "FreshBox meal kit",
    "Tempo fitness app",
    "Lumen smart bulb pack",
    "Vault password manager",
]
TONES = ["calm", "frustrated", "confused", "angry", "polite"]
ISSUES = [
    "charged twice",
    "never arrived",
    "stopped working after an update",
    "cannot log in",
    "wants to cancel",
    "asks for a missing feature",
    "wants their data deleted",
    "setup help",
    "wrong item delivered",
    "refund not received",
    "account locked after a trip",
    "broken on arrival",
]
LANGS = ["", "", "", "", "de", "fr", "es"]


def multi_turn() -> list[dict[str, object]]:
    out = []
    for k, (question, answer, follow_ups) in enumerate(CONVERSATIONS):
        messages = [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
        out.append(
            {
                "id": f"multi_turn-{k:02d}a",
                "category": "multi_turn",
                "messages": [*messages, {"role": "user", "content": follow_ups[0]}],
            }
        )
        # The second conversation goes one turn further: the first follow-up answered briefly.
        brief = (
            "Briefly: it depends on the details above; the main points are the trade-offs I "
            "described, applied to your case."
        )
        out.append(
            {
                "id": f"multi_turn-{k:02d}b",
                "category": "multi_turn",
                "messages": [
                    {"role": "system", "content": "You are a patient, precise assistant."},
                    *messages,
                    {"role": "user", "content": follow_ups[0]},
                    {"role": "assistant", "content": brief},
                    {"role": "user", "content": follow_ups[1]},
                ],
            }
        )
    return out


def datagen(rng: random.Random, count: int = 50) -> list[dict[str, object]]:
    out = []
    for k in range(count):
        request = (
            f"product={rng.choice(PRODUCTS)}; tone={rng.choice(TONES)}; issue={rng.choice(ISSUES)}"
        )
        lang = rng.choice(LANGS)
        if lang:
            request += f"; language={lang}"
        out.append(datagen_record(f"datagen-{k:02d}", "datagen", request))
    return out


def datagen_record(prompt_id: str, category: str, request: str) -> dict[str, object]:
    """One data-generation request behind the shared system prompt."""
    return {
        "id": prompt_id,
        "category": category,
        "messages": [
            {"role": "system", "content": DATAGEN_SYSTEM},
            {"role": "user", "content": f"Request: {request}"},
        ],
    }


def datagen_pipeline(
    rng: random.Random, taken: list[dict[str, object]], count: int = 1300
) -> list[dict[str, object]]:
    """The data-generation set at pipeline scale: `count` distinct requests behind the same
    system prompt, none of them one of `taken` (the datagen set's), enough for a steady state
    with each run its own prompts: experiment=multi_turn_chat's 3 runs of 415 requests and the
    warm-up (1,247), experiment=datagen's runs of 150 + 96 + 149. random.sample draws the first
    900 as it did when the set was 900 (the first 900 records are unchanged)."""
    used = {str(r["messages"][-1]["content"]) for r in taken}  # type: ignore[index]
    requests = []
    for p in PRODUCTS:
        for t in TONES:
            for i in ISSUES:
                for lang in sorted(set(LANGS)):
                    request = f"product={p}; tone={t}; issue={i}" + (
                        f"; language={lang}" if lang else ""
                    )
                    if f"Request: {request}" not in used:
                        requests.append(request)
    return [
        datagen_record(f"datagen_pipeline-{k:03d}", "datagen_pipeline", request)
        for k, request in enumerate(rng.sample(requests, count))
    ]
