"""Words people use for the same thing, so that "remove a folder" finds ``delete_directory``.

A tool is written in its author's words and a task in its user's: the two rarely agree ("erase" and "delete",
"ticket" and "issue", "PR" and "pull request", "look up" and "search"). Each group below is one meaning in the
everyday words of software work, not in any server's own vocabulary; a phrase of two words counts when its words
come in that order. A tool whose name, description or parameters say one of a group's phrases is also indexed
under the others, in a field of its own that ranks below the tool's own words (see ``_index``): a tool that says
"remove" still ranks above one that only means it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import cache

from onetool.search._words import words

__all__ = ["related"]

GROUPS: tuple[str, ...] = (
    # what is done
    "create, make, add, new, insert, generate, build, register, set up, open, start",
    "delete, remove, erase, drop, destroy, trash, purge, unlink, discard, wipe, clear, rm, forget",
    "get, fetch, retrieve, read, obtain, load, pull, grab, view, show, see, display, look at, open, inspect",
    "list, enumerate, browse, index, all, overview, ls",
    "update, edit, modify, change, alter, patch, amend, adjust, revise, rewrite, tweak, set",
    "search, find, query, look up, lookup, locate, seek, discover, filter, grep, match",
    "send, post, publish, deliver, submit, dispatch, notify, message, tell",
    "reply, respond, answer, comment",
    "run, execute, invoke, launch, trigger, perform, call, start, exec",
    "stop, kill, terminate, cancel, halt, abort, end, interrupt, shut down",
    "close, resolve, finish, complete, done, archive",
    "reopen, restore, undo, revert, rollback, roll back, recover, reset",
    "copy, duplicate, clone, fork, replicate",
    "move, rename, relocate, transfer, mv",
    "save, store, write, persist, record, keep, put",
    "download, export, save, pull",
    "upload, import, attach, push",
    "compare, diff, difference, changes, delta",
    "sort, order, arrange, rank, reorder",
    "format, style, bold, italic, font, color, colour, highlight, shading",
    "monitor, watch, track, observe, notify, alert",
    "merge, combine, join, integrate, land",
    "convert, transform, translate, turn into, format, export",
    "summarize, summary, overview, digest, brief, tldr",
    "count, number, total, how many, tally",
    "check, verify, validate, test, inspect, lint, audit",
    "wait, sleep, pause, delay, hold",
    "schedule, plan, book, calendar, appointment",
    "assign, allocate, give, delegate",
    "approve, accept, sign off, lgtm",
    "reject, decline, deny, refuse",
    "subscribe, follow, watch",
    "install, add, set up, setup",
    "deploy, release, ship, publish, rollout, roll out",
    "log in, login, sign in, authenticate, auth",
    "think, reason, reflect, plan, brainstorm, thought, reasoning",
    "remember, memorize, memory, recall, note",
    "calculate, compute, evaluate, math, arithmetic, sum",
    # what it is done to
    "file, document, doc, documents, readme",
    "directory, folder, dir, path",
    "content, contents, text, body",
    "issue, ticket, bug, bug report, task, incident, problem, defect",
    "todo, to do, task, action item, reminder",
    "pull request, pr, merge request, mr, patch, code review",
    "repository, repo, project, codebase",
    "commit, changeset, revision, check in",
    "branch, ref",
    "tag, label, tags, labels",
    "user, person, people, member, account, profile, users, colleague, teammate",
    "team, group, organization, org, workspace",
    "message, chat, post, dm, conversation, thread",
    "channel, room, chat",
    "email, mail, inbox, e-mail",
    "page, web page, webpage, website, site, url, link, address",
    "web, internet, online, website",
    "browser, tab, window, chrome",
    "navigate, go to, visit, open, browse, load",
    "click, press, tap, select, choose",
    "type, enter, input, fill, fill in, key in",
    "hover, mouse over",
    "scroll, swipe",
    "screenshot, screen shot, capture, snapshot, screen grab, picture, image",
    "image, picture, photo, graphic, figure, icon",
    "scrape, crawl, extract, harvest, spider",
    "time, clock, hour, now, current time, date",
    "timezone, time zone, tz, zone",
    "weather, forecast, temperature",
    "elevation, altitude, height, above sea level",
    "map, location, place, address, geocode, coordinates, directions, route",
    "database, db, sql, table, schema",
    "table, sheet, spreadsheet, worksheet, workbook, grid, excel, xlsx",
    "row, record, entry, line",
    "column, field, attribute, property",
    "cell, value",
    "entity, node, object, item, thing",
    "relation, relationship, link, connection, edge, association",
    "observation, fact, note, detail",
    "note, notes, memo, annotation",
    "log, logs, console, output, trace",
    "error, exception, failure, crash, fault, bug, stack trace",
    "event, events, activity",
    "network, request, requests, http, traffic, api call",
    "performance, speed, slow, latency, profiling, profile, trace",
    "flaky, intermittent, unstable, flake",
    "secret, credential, password, token, key, api key",
    "environment, env, variable, config, configuration, settings, setting",
    "documentation, docs, manual, reference, guide, api reference, how to",
    "library, package, dependency, framework, module, sdk",
    "payment, charge, pay, transaction, purchase",
    "invoice, bill, billing, receipt",
    "customer, client, buyer, contact",
    "contact, lead, person, people",
    "company, business, organization, firm, account",
    "deal, opportunity, sale, pipeline",
    "refund, reimburse, money back, chargeback",
    "subscription, plan, membership, recurring",
    "price, pricing, cost, rate, fee",
    "product, item, sku, goods",
    "container, pod, docker",
    "cluster, kubernetes, k8s, kube",
    "deployment, service, workload, app",
    "pipeline, workflow, build, job, ci, ci cd",
    "paper, article, publication, preprint, research",
    "video, clip, movie, recording",
    "audio, sound, voice, speech",
    "pdf, document",
    "word, docx",
    "comment, remark, feedback, note, review",
    "heading, header, title, headline",
    "paragraph, text, section, passage",
    "history, log, past, timeline, previous",
    "status, state, health, progress",
    "settings, preferences, options, config",
    "permission, access, role, privilege, rights",
    "random, arbitrary, sample",
    "echo, repeat, say back, mirror",
    "number, integer, digit, amount",
    "sum, add, total, plus",
    "dialog, alert, popup, prompt, modal",
    "form, fields, inputs",
    "key, keyboard, keystroke, shortcut",
    "drag, drop, drag and drop",
    "element, selector, node, component",
    "javascript, js, script",
    "code, source, source code, snippet",
    "terminal, shell, command line, bash, command, cli",
    "process, program, pid",
    "size, length, dimensions",
    "tree, hierarchy, structure, outline",
    "metadata, info, information, details, properties, stat, stats",
    "block, blocks, content",
    "comment, discussion, thread",
    "wiki, knowledge base, kb, encyclopedia, wikipedia",
    "news, headlines, articles",
    "question, ask, query",
    "answer, reply, response",
    "meaning, definition, define",
    "trend, trending, popular",
    "image, render, draw, chart, plot, graph",
    "chart, graph, plot, visualization, diagram",
    "repository file, source file",
)
"""One meaning a line. A word may be in several lines: "open" creates an issue and views a page."""

_MAX_OUT = 200
"""Related words indexed for one tool at most (a long description matches many groups; past this it adds noise)."""


@cache
def _table() -> tuple[dict[tuple[str, ...], frozenset[int]], tuple[tuple[str, ...], ...]]:
    """Each phrase's stemmed words -> the groups it is in; and each group's words, stemmed."""
    by_phrase: dict[tuple[str, ...], set[int]] = {}
    groups: list[tuple[str, ...]] = []
    for i, line in enumerate(GROUPS):
        members: list[str] = []
        for phrase in line.split(","):
            stems = tuple(words(phrase))
            if not stems:
                continue
            by_phrase.setdefault(stems, set()).add(i)
            members.extend(stems)
        groups.append(tuple(dict.fromkeys(members)))
    return {k: frozenset(v) for k, v in by_phrase.items()}, tuple(groups)


def related(stems: Sequence[str]) -> list[str]:
    """The words of every group a phrase of ``stems`` (stemmed words, in order) is in, less ``stems`` themselves;
    at most _MAX_OUT, in the order the groups were first met."""
    by_phrase, groups = _table()
    found: dict[int, None] = {}
    for phrase in _phrases(stems):
        for group in sorted(by_phrase.get(phrase, ())):
            found.setdefault(group)
    own = set(stems)
    out = dict.fromkeys(word for group in found for word in groups[group] if word not in own)
    return list(out)[:_MAX_OUT]


def _phrases(stems: Sequence[str]) -> Iterable[tuple[str, ...]]:
    for i, word in enumerate(stems):
        yield (word,)
        if i + 1 < len(stems):
            yield (word, stems[i + 1])
