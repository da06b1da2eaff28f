"""Tools for the bundled examples: small deterministic stand-ins for real services.

dagplan run examples/weather.yaml --tools examples/tools.py --input city=Oslo
"""

from __future__ import annotations

import asyncio
import hashlib

import dagplan


def _token(*parts: object) -> str:
    return hashlib.sha1(repr(parts).encode()).hexdigest()[:8]


class CardDeclined(Exception):
    pass


# --- refund (seed 004, "planning one step ahead") ------------------------------------------


@dagplan.tool(purity="pure")
async def checkBillingHistory(customerId: str) -> dict:
    """Look up a customer's orders and chargebacks."""
    await asyncio.sleep(0.01)
    return {"customerId": customerId, "orders": 5, "lastChargeback": "2025-09-10"}


@dagplan.tool(purity="side_effect")
async def issueRefund(customerId: str, amount: float, history: dict | None = None) -> dict:
    """Refund an amount to a customer; refuses amounts over 1000."""
    if amount > 1000:
        raise ValueError(f"refund of {amount} exceeds the 1000 limit")
    return {"confirmationId": f"refund_{_token(customerId, amount)}", "amount": amount}


# --- booking (seed 004, "adjusting a plan") --------------------------------------------------


@dagplan.tool(purity="side_effect")
async def bookFlight(destination: str) -> dict:
    """Book a flight to a destination."""
    return {"flight": f"FL-{_token(destination)}", "destination": destination}


@dagplan.tool(purity="side_effect")
async def bookHotel(destination: str) -> dict:
    """Book a hotel at a destination."""
    return {"hotel": f"Hotel {destination} Central", "petFriendly": False}


@dagplan.tool(purity="side_effect")
async def findPetFriendlyHotel(destination: str) -> dict:
    """Find and book a hotel that accepts pets."""
    return {"hotel": f"Pfoten Hotel {destination}", "petFriendly": True}


@dagplan.tool(purity="pure")
def summarizeTrip(flight: dict, hotel: dict) -> str:
    """Summarize a trip's bookings in one line."""
    return f"Flight {flight['flight']} to {flight['destination']}; staying at {hotel['hotel']}."


# --- payment with an error branch (seed 004, "handling failure") -----------------------------


@dagplan.tool(purity="side_effect")
async def processPayment(amount: float) -> dict:
    """Charge the card; amounts over 100 are declined."""
    if amount > 100:
        raise CardDeclined("Your card was declined.")
    return {"receiptId": f"rcpt_{_token(amount)}", "amount": amount}


@dagplan.tool(purity="side_effect")
async def confirmOrder(receipt: dict) -> dict:
    """Confirm the order for a receipt."""
    return {"status": "Success", "receiptId": receipt["receiptId"]}


@dagplan.tool(purity="side_effect")
async def reportFailure(error: dict) -> dict:
    """Report a failed payment to the customer."""
    return {"status": "Failed", "reason": error.get("message")}


# --- translation with a state schema (seed 004, "schema-guided planning") --------------------

_FRENCH = {"bonjour": "hello", "le": "the", "monde": "world"}


@dagplan.tool(purity="pure")
def detectLanguage(text: str) -> str:
    """Detect the language of a text (en or fr)."""
    words = text.lower().split()
    return "fr" if any(w.strip(",.!") in _FRENCH for w in words) else "en"


@dagplan.tool(purity="pure")
def isEnglish(language: str) -> bool:
    """Whether a language code is English."""
    return language == "en"


@dagplan.tool(purity="pure")
def translateText(text: str, isEnglish: bool) -> str:
    """Translate a text into English (word by word; a stand-in)."""
    if isEnglish:
        return text
    return " ".join(_FRENCH.get(w.lower().strip(",.!"), w) for w in text.split()).capitalize()


# --- weather -> park or movie, with a join (seed 004's sidenote) ------------------------------

_SUNNY = {"rome", "madrid", "lisbon", "athens"}


@dagplan.tool(purity="pure")
async def getWeather(city: str):
    """Today's weather; writes †state.sunny when sunny, else †state.notSunny."""
    report = {"city": city, "sky": "sunny" if city.lower() in _SUNNY else "rainy"}
    return report if report["sky"] == "sunny" else dagplan.Branch(1, report)


@dagplan.tool(purity="pure")
def findPark(weather: dict) -> str:
    """A park for a sunny day."""
    return f"a walk in the biggest park of {weather['city']}"


@dagplan.tool(purity="pure")
def findMovie(weather: dict) -> str:
    """A movie for a rainy day."""
    return f"a film at the cinema in {weather['city']}"


@dagplan.tool(purity="pure")
def presentSuggestion(suggestion: str) -> str:
    """Phrase a suggestion for the user."""
    return f"Today I suggest {suggestion}."


# --- the four-step OAuth plan (seed 003, steps dialect: agent tools take `task`) -------------


@dagplan.tool(purity="pure")
def search(task: str) -> str:
    """Search the code base."""
    return "Found cli/auth/session.go and cli/auth/token.go (password login only)."


@dagplan.tool(purity="pure")
def planner(task: str) -> str:
    """Design an approach."""
    return f"Design: add an OAuth provider interface, a Google provider and a callback handler. ({task[:60]})"


@dagplan.tool(purity="side_effect")
def coder(task: str) -> str:
    """Implement a change."""
    return "Implemented cli/auth/oauth.go and cli/auth/google.go."


@dagplan.tool(purity="pure")
def tester(task: str) -> str:
    """Write and run tests."""
    return "Added cli/auth/oauth_test.go: 6 tests pass."


# --- profile (seed 004, the calls dialect) ---------------------------------------------------


@dagplan.tool(purity="pure")
def fetchUserProfile(userName: str) -> dict:
    """Fetch a user's profile."""
    return {"name": userName, "joined": 2019, "projects": ["lark", "jinja"]}


@dagplan.tool(purity="pure")
def summarizeProfile(profile: dict) -> str:
    """Summarize a profile in one sentence."""
    return f"{profile['name']} joined in {profile['joined']} and works on {', '.join(profile['projects'])}."


# --- composition (issue 6): fan-out, sub-plans, loops, gates -------------------------------------


@dagplan.tool(purity="pure")
def listPullRequests(repo: str) -> list:
    """The open pull requests of a repository."""
    titles = ["Fix typo in README", "Add retry to the HTTP client", "Drop Python 3.8", "Speed up the parser"]
    return [{"number": 100 + i, "title": t, "repo": repo} for i, t in enumerate(titles)]


@dagplan.tool(purity="pure")
def fetchDiff(number: int) -> str:
    """The diff of a pull request."""
    return f"diff --git a/src/pr{number}.py b/src/pr{number}.py\n+# change {number}\n"


@dagplan.tool(purity="pure")
def reviewDiff(title: str, diff: str) -> dict:
    """A deterministic review: approve small diffs, ask for tests otherwise."""
    lines = diff.count("\n")
    return {"title": title, "verdict": "approve" if lines < 5 else "request-changes", "lines": lines}


@dagplan.tool(purity="idempotent")
def pollJob(jobId: str, polls: int = 0) -> dict:
    """Check a batch job once; it is done on the third check."""
    polls += 1
    return {"jobId": jobId, "polls": polls, "done": polls >= 3}
