"""Run search (issue 29 item 1), decided without I/O: what a run is indexed under, what a listing may ask, and whether
a run read back matches what was asked.

A run is found by its tags (all of them), by the metadata keys its tenant declares searchable (equality, as text),
by the words of its title (its workflow's id and name, and the open gate's title), by when it was created, by its
status and by its workflow id's prefix. Each of the first three is an index family (store/run_items.py writes one
small entry per family, interlude.store.item_index reads them newest first); the rest narrow what a family, or the
run listing itself, yields. What a page reads and why it stays bounded: docs/scale.md, "Run search".
"""

import json
import math
import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple

from interlude.domain import budgets
from interlude.domain.clock import epoch_of, iso
from interlude.domain.errors import Invalid
from interlude.domain.ids import MODULEX_INTERRUPT_KIND, check_author_id
from interlude.domain.title_words import MAX_TITLE_WORDS, MIN_WORD_LENGTH, words
from interlude.rules.retention import DAY_S

if TYPE_CHECKING:
    from interlude.domain.models.run import RunState
    from interlude.rules.limits import Limits

# Limits (docs/limits.md), each refused with 400 validation_error naming its field before anything is written or read.
MAX_TAGS_PER_RUN = 20
MAX_TAG_LENGTH = 128
MAX_SEARCHABLE_KEYS = budgets.MAX_SEARCHABLE_KEYS
SEARCHABLE_KEY = budgets.SEARCHABLE_KEY
MAX_METADATA_VALUE_LENGTH = 256
MAX_QUERY_LENGTH = 128
MAX_QUERY_WORDS = 5
MAX_QUERY_TAGS = 10
MAX_STORED_NAME = 256

# A tag is printable text without a comma: a listing names several tags comma-separated (`tags=a,b`), the way an
# HTTP API joins a repeated parameter.
_TAG_RE = re.compile(rf"^[^,\x00-\x1f\x7f-\x9f]{{1,{MAX_TAG_LENGTH}}}$")

# The families of the run search index (wiring.RUN_SEARCH): `TAG#{tag}`, `MD#{key}#{value}`, `TOK#{word}`.
TAG = "TAG#"
METADATA = "MD#"
WORD = "TOK#"

# Days a search entry outlives its run's creation past the tenant's retentionDays (issue 31): every entry is written
# with that provisional expiry, so the retention job stamps none of a run that ends within this many days of its
# creation (ADR 0115, amendment). A run open longer drops out of the searches by tag, value and word once its entries
# expire (the listing and the status and workflow filters still find it); the job writes them again when it ends.
SEARCH_ENTRY_MARGIN_DAYS = 90
# The run listing's entry is written once, with the same provisional expiry (issue 31, ADR 0131): the retention job
# writes it only for a run that ends too late for it. An open run whose entry's provisional expiry is this near loses
# it (the daily retention sweep: interlude.migrations.sweeps), so a run that waits longer stays listed; the job gives
# its entry the run's own expiry when it ends (`listing_stamped_at_end`).
LISTING_KEPT_DAYS = 30
# The run's own items written once, or whose last write is known (event batches, gates' items, deliveries and
# notifications), are written with a provisional expiry too, this many days past the run's creation + retentionDays:
# the retention job writes none of them for a run that ends within this many days of its creation (ADR 0133, which
# chose it by cost: every finished run's items are stored this much longer, a run that ends later pays the job). An
# open run's items lose it once it is LISTING_KEPT_DAYS near (the writers then write none; the daily sweep takes it
# off what has it), so a run keeps every item however long it waits. It is derived, not stored (a head attribute would
# put some heads over a 1 KB write unit): a release that changes it judges a run by the smaller of the two margins.
ITEMS_MARGIN_DAYS = 7


def stored_name(workflow_name: str | None) -> str | None:
    """The workflow's name as a run keeps it (for its title's words): at most MAX_STORED_NAME characters."""
    return workflow_name[:MAX_STORED_NAME] if workflow_name else None


def name_words(workflow_id: str, workflow_name: str | None) -> list[str]:
    """The words a run is found by from its creation on: its workflow's id and name."""
    return words(f"{workflow_id} {workflow_name or ''}")[:MAX_TITLE_WORDS]


def gate_title(payload: Mapping[str, Any]) -> str | None:
    """The title a person reads for a gate: the one the workflow's author gave it (an approval's, a form's, any kind's
    `data.title`), or a ModuleX interrupt's `message` (rendered when it opened: faces/modulex/nodes.py)."""
    data = payload.get("data") or {}
    title = data.get("title")
    if not title and data.get("customKind") == MODULEX_INTERRUPT_KIND:
        title = (data.get("payload") or {}).get("message")
    return title if isinstance(title, str) and title else None


def gate_words(payload: Mapping[str, Any]) -> list[str]:
    title = gate_title(payload)
    return words(title)[:MAX_TITLE_WORDS] if title else []


def title_words(state: "RunState") -> set[str]:
    """Every word the run's title holds now: its workflow's id and name, and each open gate's title."""
    found = set(name_words(state.workflowId, state.workflowName))
    for interrupt in state.interrupts.values():
        found.update(gate_words(interrupt.payload))
    return found


def metadata_text(value: Any) -> str | None:
    """A searchable metadata value as the index holds it: a string as it is, a number or boolean as its JSON; None
    for null (not indexed). Anything else is not searchable (metadata_problem says so)."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, bool | int | float):
        return json.dumps(value, allow_nan=False)
    raise TypeError(type(value).__name__)


def indexable(value: Any) -> bool:
    """Whether a metadata value can be indexed under a searchable key: a scalar of 1 to MAX_METADATA_VALUE_LENGTH
    characters as text (null is held but not indexed)."""
    try:
        text = metadata_text(value)
    except TypeError:
        return False
    return text is not None and 1 <= len(text) <= MAX_METADATA_VALUE_LENGTH


def metadata_family(key: str, text: str) -> str:
    return f"{METADATA}{key}#{text}"


def indexing(limits: "Limits", now: datetime) -> dict[str, Any]:
    """What a new run records of how it is searched (RunState's searchTitles and searchExpiry): whether its tenant
    indexes its title's words, and the provisional expiry of its search entries, from now."""
    return {
        "searchTitles": limits.search_titles,
        "searchExpiry": int(now.timestamp()) + (limits.retention_days + SEARCH_ENTRY_MARGIN_DAYS) * DAY_S,
    }


def titles_indexed(state: "RunState") -> bool:
    """Whether the run's title words have entries: its tenant's choice when it was created (runs created before the
    choice existed were all indexed by them)."""
    return state.searchTitles or state.searchExpiry is None


def stamped_at_end(state: "RunState", expires: int | None) -> bool:
    """Whether the retention job writes the run's search entries with the run's expiry `expires` (None: the run
    runs again): only those of a run created before their provisional expiry existed, or of a run that ends too late
    for it (its entries would go before the run; perhaps gone already, so the job puts them anew)."""
    if state.searchExpiry is None:
        return True
    return expires is not None and expires > state.searchExpiry


def listing_stamped_at_end(state: "RunState", expires: int) -> bool:
    """Whether the retention job writes the listing entry of a run that ended to expire at `expires`: its provisional
    expiry (the search entries') would go before the run, or the run was open so near it that the daily sweep may
    have taken it off (LISTING_KEPT_DAYS), or the run was created before entries had one."""
    if state.searchExpiry is None:
        return True
    return expires > state.searchExpiry - LISTING_KEPT_DAYS * DAY_S


def listing_expiry(state: "RunState", expires: int | None, now_s: float) -> int | None:
    """The expiry the retention job gives the run's listing entry when it writes it: never before the provisional one
    (a later end of a run that runs again may write nothing: `listing_stamped_at_end`); for a run that runs again
    (`expires` None), the provisional one while it is not near (else none: the daily sweep's rule)."""
    provisional = state.searchExpiry
    if expires is None:
        return provisional if provisional is not None and not listing_kept_open(provisional, now_s) else None
    return expires if provisional is None else max(expires, provisional)


def items_expiry(search_expiry: int | None) -> int | None:
    """The provisional expiry of a run's own items (ITEMS_MARGIN_DAYS), from its search entries' (`RunState.
    searchExpiry`, which its head holds): the run's creation + the retentionDays it was created under + the margin;
    None for a run created before its search entries had one."""
    if search_expiry is None:
        return None
    return search_expiry - (SEARCH_ENTRY_MARGIN_DAYS - ITEMS_MARGIN_DAYS) * DAY_S


def open_expiry(provisional: int | None, now_s: float) -> int | None:
    """What an item of an open run is written with: its provisional expiry while that is not near (else none: the
    daily sweep keeps the run's items, `listing_kept_open`)."""
    return provisional if provisional is not None and not listing_kept_open(provisional, now_s) else None


def items_stamped_at_end(provisional: int | None, expires: int) -> bool:
    """Whether the retention job of a run that ended to expire at `expires` writes the run's items whatever they were
    written with (and marks its head while it does, so that a turn cut short is found: app/retention.py): the run
    ended too late for their provisional expiry, or was created before they had one."""
    return provisional is None or expires > provisional


def tasks_stamped_at_end(provisional: int | None, later_kept: bool, completed_at: str | None) -> bool:
    """Whether the retention job of a finished run (or one that runs again) writes the tasks it requested, which are
    made with its items' provisional expiry `provisional` while that is not near, else with none (ADR 0142): when it
    writes every item of the run whatever it carries (`later_kept` False: the run runs again, ended too late for the
    provisional expiry, or is re-stamped), or when the run ended with that expiry near (a task made then, or kept by
    the daily sweep, has none; a task made earlier has one, so this is what the job cannot tell without a read)."""
    if not later_kept or provisional is None:
        return True
    return completed_at is None or listing_kept_open(provisional, epoch_of(completed_at))


def listing_kept_open(provisional: int, now_s: float) -> bool:
    """Whether an open run's listing entry whose provisional expiry is `provisional` is to lose it now (the daily
    sweep), so that the run stays listed however long it waits."""
    return provisional < near_expiries(now_s)


def late_gate_expiry(now_s: float) -> int:
    """What a gate opened in an open run whose search entries' expiry is near already (a run older than retentionDays
    + 60 days) expires at, with its inbox entries (store/transitions.gates_expiry): as far from now as those entries'
    was from the run's creation's retention end, so never near when written; the daily sweep takes it off when it is
    near while the gate is open (docs/adr/0154)."""
    return int(now_s) + SEARCH_ENTRY_MARGIN_DAYS * DAY_S


def near_expiries(now_s: float) -> int:
    """An open run's expiry earlier than this is near (LISTING_KEPT_DAYS): the daily sweep takes it off."""
    return math.ceil(now_s) + LISTING_KEPT_DAYS * DAY_S


def metadata_families(state: "RunState", keys: Iterable[str]) -> list[str]:
    """The families of `keys` (declared searchable after the run was created) the run holds an indexable value of:
    what the search-keys job (app/search_keys.py) indexes an older run under, and its retention stamps."""
    return [
        metadata_family(key, str(metadata_text(state.metadata[key])))
        for key in dict.fromkeys(keys)
        if key in state.metadata and indexable(state.metadata[key])
    ]


def creation_families(state: "RunState") -> list[str]:
    """The families a run is listed under from its creation on: each tag, each searchable metadata key it holds
    (those its tenant declared when it was created: `state.searchableMetadata`), each word of its workflow's id and
    name."""
    families = [f"{TAG}{tag}" for tag in dict.fromkeys(state.tags)]
    for key in state.searchableMetadata:
        text = metadata_text(state.metadata.get(key))
        if text is not None:
            families.append(metadata_family(key, text))
    if titles_indexed(state):
        families += [f"{WORD}{w}" for w in name_words(state.workflowId, state.workflowName)]
    return families


def gate_families(state: "RunState", payloads: Iterable[Mapping[str, Any]]) -> list[str]:
    """The word families gates opened now add: the words of their titles the run's name does not hold already.
    Never taken back when a gate closes: a page checks the run's open gates (title_words) before listing it."""
    if not titles_indexed(state):
        return []
    named = set(name_words(state.workflowId, state.workflowName))
    added = dict.fromkeys(w for payload in payloads for w in gate_words(payload) if w not in named)
    return [f"{WORD}{w}" for w in added]


# -- what a run may carry (createRun) -----------------------------------------------------------------


def check_run_fields(tags: list[str], metadata: Mapping[str, Any], searchable: Iterable[str], within: str = "") -> None:
    """Refuse tags and searchable metadata the index cannot hold, before the run is created (`within`: where the
    request holds them, e.g. a fork's `runOptionsOverlay.`)."""
    if len(tags) > MAX_TAGS_PER_RUN:
        raise Invalid(f"a run holds at most {MAX_TAGS_PER_RUN} tags", {"field": f"{within}tags", "maxTags": MAX_TAGS_PER_RUN})
    for i, tag in enumerate(tags):
        if not _TAG_RE.fullmatch(tag):
            raise Invalid(
                f"a tag is 1 to {MAX_TAG_LENGTH} characters, with no comma and no control character",
                {"field": f"{within}tags/{i}", "maxLength": MAX_TAG_LENGTH},
            )
    for key in searchable:
        if key in metadata:
            metadata_problem(metadata[key], f"{within}metadata/{key}")


def metadata_problem(value: Any, field_name: str) -> None:
    try:
        text = metadata_text(value)
    except TypeError:
        raise Invalid(
            f"{field_name} is searchable: it must be a string, a number, a boolean or null",
            {"field": field_name},
        ) from None
    if text is not None and not 1 <= len(text) <= MAX_METADATA_VALUE_LENGTH:
        raise Invalid(
            f"{field_name} is searchable: its value is 1 to {MAX_METADATA_VALUE_LENGTH} characters",
            {"field": field_name, "maxLength": MAX_METADATA_VALUE_LENGTH},
        )


# -- what a listing asks ------------------------------------------------------------------------------


class RunFilters(NamedTuple):
    """A run listing's filters, checked. Empty: every run."""

    tags: tuple[str, ...] = ()
    metadata: Mapping[str, str] = MappingProxyType({})
    created_after: str | None = None  # wire form (iso): at or after
    created_before: str | None = None  # wire form: strictly before
    statuses: frozenset[str] = frozenset()
    workflow_id: str | None = None
    workflow_prefix: str | None = None
    query: tuple[str, ...] = ()  # the words of `q`
    # Whether the tenant indexes its runs' title words (its searchTitles); if not, `q` reads the run listing.
    titles_indexed: bool = True

    def driving_family(self) -> str | None:
        """The index family a page reads, None for the run listing itself: a metadata value, else a tag, else a word
        of `q` (when titles are indexed), the first of these the filters name (each is usually rarer than the next). Which one is rarest is
        not known without counting, and keeping counts would cost a write per family per run."""
        if self.metadata:
            key = min(self.metadata)
            return metadata_family(key, self.metadata[key])
        if self.tags:
            return f"{TAG}{max(self.tags, key=len)}"
        if self.query and self.titles_indexed:
            return f"{WORD}{max(self.query, key=len)}"
        return None

    @property
    def on_heads(self) -> bool:
        """Whether a run's head must be read to decide (its entry holds only its id, workflow id and creation)."""
        return bool(self.tags or self.metadata or self.statuses or self.query)

    def accepts(self, state: "RunState") -> bool:
        """Whether the run matches every filter (creation bounds and workflow ids narrow the index read itself)."""
        if self.workflow_id is not None and state.workflowId != self.workflow_id:
            return False
        if self.workflow_prefix is not None and not state.workflowId.startswith(self.workflow_prefix):
            return False
        if self.created_after is not None and state.createdAt < self.created_after:
            return False
        if self.created_before is not None and state.createdAt >= self.created_before:
            return False
        if self.statuses and state.status not in self.statuses:
            return False
        if self.tags and not set(self.tags) <= set(state.tags):
            return False
        for key, wanted in self.metadata.items():
            # Compared as text. A listing names only keys declared now (query_metadata), and a page reads the entries
            # of one of them: written when the run was created, or by the search-keys job for a run created before.
            try:
                if metadata_text(state.metadata.get(key)) != wanted:
                    return False
            except TypeError:
                return False
        return not self.query or set(self.query) <= title_words(state)


def query_words(q: str) -> tuple[str, ...]:
    if not 1 <= len(q) <= MAX_QUERY_LENGTH:
        raise Invalid(f"q is 1 to {MAX_QUERY_LENGTH} characters", {"field": "q", "maxLength": MAX_QUERY_LENGTH})
    found = words(q)
    if not found:
        raise Invalid(
            f"q must hold a word of at least {MIN_WORD_LENGTH} letters or digits", {"field": "q"}
        )
    if len(found) > MAX_QUERY_WORDS:
        raise Invalid(f"q holds at most {MAX_QUERY_WORDS} words", {"field": "q", "maxWords": MAX_QUERY_WORDS})
    return tuple(found)


def query_tags(text: str, field_name: str = "tags") -> tuple[str, ...]:
    tags = tuple(dict.fromkeys(text.split(",")))
    if len(tags) > MAX_QUERY_TAGS:
        raise Invalid(f"{field_name} names at most {MAX_QUERY_TAGS} tags", {"field": field_name, "maxTags": MAX_QUERY_TAGS})
    for tag in tags:
        if not _TAG_RE.fullmatch(tag):
            raise Invalid(
                f"{field_name}: a tag is 1 to {MAX_TAG_LENGTH} characters with no control character, tags separated by commas",
                {"field": field_name, "maxLength": MAX_TAG_LENGTH},
            )
    return tags


def query_metadata(asked: Mapping[str, str], searchable: Iterable[str]) -> dict[str, str]:
    """`metadata.<key>` parameters by key; each key must be one the tenant declared searchable."""
    declared = set(searchable)
    for key, value in asked.items():
        name = f"metadata.{key}"
        if key not in declared:
            raise Invalid(
                f"{name}: {key!r} is not a searchable metadata key of this tenant (its settings' searchableMetadata)",
                {"field": name, "searchable": sorted(declared)},
            )
        if not 1 <= len(value) <= MAX_METADATA_VALUE_LENGTH:
            raise Invalid(
                f"{name} is 1 to {MAX_METADATA_VALUE_LENGTH} characters",
                {"field": name, "maxLength": MAX_METADATA_VALUE_LENGTH},
            )
    return dict(asked)


def query_instant(text: str, field_name: str) -> str:
    """A time bound as the index sorts it: RFC 3339 with its offset (or Z), to the millisecond in UTC."""
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
        if moment.tzinfo is None or "T" not in text.upper():
            raise ValueError(text)
        return iso(moment.astimezone(UTC))
    except (ValueError, OverflowError):  # OverflowError: an instant whose UTC falls outside years 1-9999
        raise Invalid(f"{field_name} must be an RFC 3339 date-time with its offset", {"field": field_name}) from None


# -- one parser, two spellings ------------------------------------------------------------------------


class Spelling(NamedTuple):
    """What a face calls the listing's filters: GET /runs in OpenWOP's camelCase, ModuleX's GET /workflow-runs in
    snake_case. Both are parsed by parse_filters, under the same rules and limits; a refusal names the face's own
    parameter."""

    workflow_id: str
    workflow_prefix: str
    created_after: str
    created_before: str
    status: str = "status"
    tags: str = "tags"
    q: str = "q"
    metadata: str = "metadata."  # `metadata.<key>=value`: equality on a key the tenant declared searchable


OPENWOP = Spelling("workflowId", "workflowIdPrefix", "createdAfter", "createdBefore")
MODULEX = Spelling("workflow_id", "workflow_id_prefix", "created_after", "created_before")


def asks_metadata(query: Mapping[str, str], spelling: Spelling = OPENWOP) -> bool:
    """Whether a listing names a metadata key (only then are the tenant's searchable keys read)."""
    return any(name.startswith(spelling.metadata) for name in query)


def parse_filters(
    query: Mapping[str, str],
    searchable: Iterable[str],
    statuses: Mapping[str, Iterable[str]],
    spelling: Spelling = OPENWOP,
) -> RunFilters:
    """A listing's filters (docs/api.md, "Finding runs"; docs/modulex.md, "Run rows"), each checked before anything
    is read: a 400 naming the parameter. `status` may name several statuses, comma-separated (any of them; `statuses`:
    the run statuses each word the face accepts stands for); `tags` several tags (all of them)."""
    s = spelling
    workflow_id = query.get(s.workflow_id)
    if workflow_id is not None:
        check_author_id(workflow_id, s.workflow_id)
    prefix = query.get(s.workflow_prefix)
    if prefix is not None:
        check_author_id(prefix, s.workflow_prefix)  # the start of a workflow id is written as one
    asked_statuses = query[s.status].split(",") if s.status in query else []
    if not set(asked_statuses) <= set(statuses):
        raise Invalid(f"{s.status} must be one or more of {sorted(statuses)}, comma-separated", {"field": s.status})
    after = query_instant(query[s.created_after], s.created_after) if s.created_after in query else None
    before = query_instant(query[s.created_before], s.created_before) if s.created_before in query else None
    if after is not None and before is not None and after >= before:
        raise Invalid(f"{s.created_after} must be before {s.created_before}", {"field": s.created_after})
    asked = {name.removeprefix(s.metadata): value for name, value in query.items() if name.startswith(s.metadata)}
    return RunFilters(
        tags=query_tags(query[s.tags], s.tags) if s.tags in query else (),
        metadata=query_metadata(asked, searchable),
        created_after=after,
        created_before=before,
        statuses=frozenset(run_status for word in asked_statuses for run_status in statuses[word]),
        workflow_id=workflow_id,
        workflow_prefix=prefix,
        query=query_words(query[s.q]) if s.q in query else (),
    )
