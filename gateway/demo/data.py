"""Deterministic help-centre data: articles, users and their support messages.

Everything comes from seeded ``random.Random`` instances (string seeds are
hashed with SHA-512, so results do not depend on ``PYTHONHASHSEED``).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

Record = dict[str, Any]

EPOCH = datetime(2021, 1, 1, tzinfo=UTC)
NOW = datetime(2025, 6, 1, tzinfo=UTC)
SUPPORT_EMAIL = "support@help.example.com"

# "# category | tags" starts a topic, "? " lines hold "|"-separated titles and
# every other line is one sentence an article body can be built from.
_CORPUS = """
# billing | invoices payments subscription vat pricing credit-card
? Understanding your monthly invoice | How to update your payment method
? Why was my credit card charged twice? | Switching between monthly and annual billing
? Downloading VAT receipts and tax invoices | What happens when a payment fails
? Changing your subscription plan | Applying a promo code or discount
Your invoice lists every charge on your subscription for the current billing period.
Invoices are emailed to the billing contact on the first day of each billing cycle.
You can update the credit card or payment method for your subscription on the Billing page.
If a payment fails we retry the charge three times over seven days before pausing the plan.
Annual billing is charged upfront and includes a discount compared with monthly billing.
When you upgrade your plan the price difference is prorated and added to your next invoice.
VAT is calculated from the billing address and shown as a separate line on each tax invoice.
A duplicate charge is usually a pending card authorisation that your bank releases in days.
Promo codes apply a discount to the next invoice and cannot be combined with other offers.
Only account owners and billing admins can view invoices and change the payment method.
# login | password login 2fa sso security sign-in
? How to reset your password | I didn't receive the password reset email
? Setting up two-factor authentication | Signing in with single sign-on (SSO)
? Why is my account locked? | Password requirements explained
? Recovering access without your authenticator app | Signing out of all devices
To reset your password, click Forgot password on the login page and enter your email.
The password reset link is valid for 30 minutes and can only be used once.
If the reset email does not arrive, check your spam folder and the address on your account.
Passwords must be at least twelve characters long and cannot match your last five passwords.
After five failed login attempts your account is locked for fifteen minutes to protect it.
Two-factor authentication adds a one-time code from an authenticator app to every sign in.
Keep your backup codes safe; each code lets you log in once if you lose your phone.
Single sign-on lets your team log in with their company identity provider, not a password.
When SSO is enforced, password login is disabled for every member of the workspace.
Administrators can force a password reset for any member with a compromised login.
# shipping | delivery tracking orders customs carrier warehouse
? Tracking your order | Shipping options and delivery times | Shipping to a different address
? What to do if your package is late | International shipping and customs duties
? Changing the delivery address after ordering | Damaged or missing items in your parcel
? Free shipping thresholds
Once your order ships you receive an email with the carrier name and a tracking number.
Standard shipping takes three to five business days; express delivery arrives next day.
Tracking updates can take up to 24 hours to appear after the shipping label is created.
International orders may be subject to customs duties and import taxes at delivery.
You can change the delivery address until the order is packed in our warehouse.
Orders over 50 dollars qualify for free standard shipping within the country.
We ship from warehouses in Rotterdam and Ohio, so delivery estimates vary by destination.
Parcels that cannot be delivered go back to the warehouse after three delivery attempts.
Report a damaged parcel within seven days with photos of the package and shipping label.
Split shipments happen when items leave different warehouses, each with its own tracking.
# returns | refund returns exchange store-credit return-label cancellation
? How to return an item | When will I get my refund? | Our refund policy explained
? Exchanging an item for a different size | Returning a gift | Items that cannot be returned
? Refunds for cancelled orders | Printing a prepaid return label
You can return most items within 30 days of delivery for a full refund.
Start a return from the Orders page, choose the items and print the prepaid return label.
A refund goes to the original payment method once the warehouse inspects the return.
A refund usually appears on your statement five to ten business days after the return.
Returned items must be unused and in their original packaging to qualify for a refund.
Gift returns are refunded as store credit so the person who bought the gift is not told.
Final sale items, gift cards and personalised products cannot be returned or refunded.
If you cancel an order before it ships we refund the full amount including delivery.
A partial refund applies when a returned item is damaged, missing parts or used.
You get an email confirming the refund amount as soon as the return is processed.
# api | api webhooks integrations oauth developers rate-limits
? Getting started with the REST API | Creating and rotating API keys | Understanding API rate limits
? Setting up webhooks | Handling API errors and retries | Paginating API results
? Connecting the Slack integration | OAuth scopes for third-party apps
Every API request must include an API key in the Authorization header as a bearer token.
You can create, rotate and revoke API keys from the Developer settings page.
The REST API allows 600 requests per minute per key and returns HTTP 429 above the limit.
Webhooks send a signed JSON payload to your endpoint whenever an event occurs.
Verify the webhook signature with your signing secret before trusting the payload.
List endpoints return paginated results with a cursor you pass to fetch the next page.
Retry failed API requests with exponential backoff and an idempotency key.
API error responses include a machine-readable code and a human-readable message.
The Slack integration posts notifications to a channel you choose during setup.
Third-party apps request OAuth scopes, and users approve which data the app can access.
# privacy | gdpr privacy personal-data cookies data-retention consent
? How we handle your personal data | Requesting a copy of your data
? Deleting your account and personal data | Our GDPR commitments | Managing cookie preferences
? Data retention periods | Where is my data stored? | Reporting a privacy concern
Under the GDPR you can request a copy of the personal data we hold about you at any time.
Data export requests are fulfilled within 30 days and delivered as a downloadable archive.
Deleting your account permanently erases your personal data after a 14-day grace period.
We process personal data only for the purposes described in our privacy policy.
Customer data is stored in EU data centres and encrypted at rest and in transit.
You can withdraw consent for marketing emails and analytics cookies in privacy settings.
Our data protection officer reviews every privacy request and can be reached by email.
Backups containing personal data are retained for 35 days and then securely destroyed.
Essential cookies keep you signed in; optional cookies are only set with your consent.
If you believe your data was misused, you can complain to your supervisory authority.
# account | profile settings workspace team notifications roles
? Changing your email address | Updating your profile and display name
? Managing notification preferences | Inviting team members to your workspace
? Transferring account ownership | Changing your language and time zone | Merging duplicate accounts
? Deactivating a team member
Change your email address in Account settings; we send a link to confirm the new address.
Your display name and profile photo are visible to everyone in your workspace.
Notification preferences let you choose which emails and alerts you receive.
Workspace admins can invite team members by email and assign each of them a role.
Only the current owner can transfer account ownership to another workspace admin.
Language and time zone settings change how dates and times appear across your account.
Duplicate accounts cannot be merged automatically, but support can move data between them.
Deactivated members lose access at once and no longer count towards your seat limit.
Roles control what members can see and change, from viewer up to owner.
Account settings changes are recorded in the audit log with the member who made them.
# mobile | ios android mobile-app push offline sync
? Installing the mobile app | Enabling push notifications on iOS and Android | Using the app offline
? The mobile app keeps crashing | Syncing data between phone and desktop
? Supported iPhone and Android versions | Signing in on the mobile app | Reducing mobile data usage
Download the mobile app from the App Store on iPhone or Google Play on Android.
Push notifications must be allowed in your phone settings before the app can alert you.
Offline mode keeps recent items on your device and syncs changes when you reconnect.
If the mobile app crashes on launch, update to the latest version and restart your phone.
The app supports iOS 16 and Android 10 or later; older versions no longer get updates.
Changes made in the mobile app sync to the desktop app within a few seconds.
Clearing the app cache can fix stuck syncing without deleting your data.
Turn on Wi-Fi only sync to reduce mobile data usage when travelling.
Biometric unlock with Face ID or fingerprint keeps the app secure on shared phones.
Home screen widgets on iOS and Android show your latest notifications at a glance.
"""


@dataclass(frozen=True)
class Topic:
    tags: tuple[str, ...]
    titles: list[str]
    sentences: list[str]


def _parse_corpus(text: str) -> dict[str, Topic]:
    topics: dict[str, Topic] = {}
    for line in filter(None, text.splitlines()):
        if line.startswith("# "):
            category, tags = line[2:].split(" | ")
            topic = topics[category] = Topic(tuple(tags.split()), [], [])
        elif line.startswith("? "):
            topic.titles.extend(title.strip() for title in line[2:].split("|"))
        else:
            topic.sentences.append(line)
    return topics


TOPICS = _parse_corpus(_CORPUS)
CATEGORIES = tuple(TOPICS)

QUALIFIERS = ("", "", "", " for business accounts", " on the Teams plan", " (EU customers)")
CLOSINGS = (
    "If you still need help, contact our support team from the Help menu.",
    "Related articles are linked at the bottom of this page.",
    "Was this article helpful? Let us know using the feedback buttons below.",
    "Support is available around the clock by chat and email.",
)
AUTHORS = ("Priya Shah", "Tom Becker", "Ana Ruiz", "Kenji Mori", "Lena Novak", "Sam Okafor")
LOCALES = ("en-US", "en-US", "en-US", "en-GB", "en-CA")
FIRST_NAMES = ("Alice", "Bruno", "Chen", "Dana", "Elif", "Farah", "Goran", "Hana", "Ivan", "Jade")
LAST_NAMES = ("Khan", "Lopez", "Meyer", "Nakamura", "Olsen", "Park", "Quinn", "Rossi")
MESSAGE_LABELS = ("inbox", "important", "follow-up")


@dataclass(frozen=True)
class Dataset:
    articles: list[Record]
    users: list[Record]
    messages: dict[str, list[Record]]  # user id -> messages, newest first


def iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _random_time(rng: random.Random, start: datetime, end: datetime) -> datetime:
    return start + timedelta(seconds=rng.randrange(max(int((end - start).total_seconds()), 1)))


def _slug(title: str, number: int) -> str:
    return f"{re.sub(r'[^a-z0-9]+', '-', title.lower()).strip('-')}-{number}"


def _article(rng: random.Random, number: int) -> Record:
    category = rng.choice(CATEGORIES)
    topic = TOPICS[category]
    title = rng.choice(topic.titles) + rng.choice(QUALIFIERS)
    picked = rng.sample(topic.sentences, rng.randint(6, len(topic.sentences)))
    paragraphs = [" ".join(picked[start : start + 3]) for start in range(0, len(picked), 3)]
    created = _random_time(rng, EPOCH, NOW - timedelta(days=30))
    return {
        "id": f"art-{number:04d}",
        "title": title,
        "body": "\n\n".join([*paragraphs, rng.choice(CLOSINGS)]),
        "category": category,
        "tags": rng.sample(topic.tags, rng.randint(2, 3)),
        "author": rng.choice(AUTHORS),
        "locale": rng.choice(LOCALES),
        "created_at": iso(created),
        "updated_at": iso(_random_time(rng, created, NOW)),
        "url": f"https://help.example.com/articles/{_slug(title, number)}",
        "visibility": "internal" if rng.random() < 0.15 else "public",
    }


def _thread(rng: random.Random, user: Record, thread_id: str, size: int) -> list[Record]:
    """A support conversation that alternates between the user and the support desk."""
    category = rng.choice(CATEGORIES)
    topic = TOPICS[category]
    subject = rng.choice(topic.titles)
    sent = _random_time(rng, EPOCH, NOW - timedelta(days=7))
    messages = []
    for position in range(size):
        from_user = position % 2 == 0
        greeting = "Hi support," if from_user else f"Hi {user['name'].split()[0]},"
        sign_off = "Thanks!" if from_user else "Kind regards, the Help Centre team"
        sent += timedelta(minutes=rng.randint(5, 2880))
        messages.append(
            {
                "thread_id": thread_id,
                "from": user["email"] if from_user else SUPPORT_EMAIL,
                "to": SUPPORT_EMAIL if from_user else user["email"],
                "subject": subject if position == 0 else f"Re: {subject}",
                "body": " ".join([greeting, *rng.sample(topic.sentences, 2), sign_off]),
                "sent_at": iso(sent),
                "labels": [category, *rng.sample(MESSAGE_LABELS, rng.randint(0, 2))],
                "read": rng.random() < 0.7,
                "priority": rng.choices(("low", "normal", "high"), weights=(2, 6, 1))[0],
            }
        )
    return messages


def _messages(rng: random.Random, user: Record, number: int) -> list[Record]:
    wanted = rng.randint(10, 30)
    messages: list[Record] = []
    threads = 0
    while len(messages) < wanted:
        threads += 1
        size = min(rng.randint(1, 4), wanted - len(messages))
        messages += _thread(rng, user, f"th-{number:03d}-{threads:02d}", size)
    messages.sort(key=lambda message: message["sent_at"], reverse=True)
    return [{"id": f"msg-{number:03d}-{i:03d}", **m} for i, m in enumerate(messages, start=1)]


def generate(n_articles: int = 300, seed: int = 7, n_users: int = 20) -> Dataset:
    """Build the whole dataset; the same arguments always give the same data."""
    article_rng = random.Random(f"articles:{seed}")
    articles = [_article(article_rng, number) for number in range(1, n_articles + 1)]
    user_rng = random.Random(f"users:{seed}")
    users: list[Record] = []
    messages: dict[str, list[Record]] = {}
    for number in range(1, n_users + 1):
        first, last = user_rng.choice(FIRST_NAMES), user_rng.choice(LAST_NAMES)
        user = {
            "id": f"u-{number:03d}",
            "name": f"{first} {last}",
            "email": f"{first}.{last}{number}@example.com".lower(),
        }
        users.append(user)
        messages[user["id"]] = _messages(user_rng, user, number)
    return Dataset(articles=articles, users=users, messages=messages)
