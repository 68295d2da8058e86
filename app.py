"""The DFlash playground: the same prompt through the target alone and through DFlash, side by side.

    python app.py                      # the embedded SmolLM2-135M-Instruct pair
    python app.py --model DIR_OR_HUB_ID --draft DIR_OR_HUB_ID --port 7860

Both runs go through the one MLX worker thread, one after the other, so each speed is the run's
own; "Replay race" then plays both at their recorded times (`dflash/replay.py`). Everything shown
is a view of the engine's events (`dflash/ui.py`). The OpenAI-compatible API (`dflash/server.py`)
is served by the same process, on the same loaded pair. Guide: docs/playground.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import traceback
from dataclasses import asdict, replace
from pathlib import Path
from time import monotonic, sleep
from types import SimpleNamespace
from typing import Iterator, Optional

import gradio as gr

if __name__ == "__main__":  # the program chooses how MLX computes before mlx loads
    from dflash import backend

    backend.setup()

from dflash.backend import on_cpu
from dflash.cli import ArgumentParser, add_distributed_arg
from dflash.cluster import serve_ranks
from dflash.config import DEFAULT_BLOCK_SIZE, MAX_TOKENS_LIMIT, GenerationConfig, default_block_size
from dflash.events import Summary
from dflash.load import encode_prompt
from dflash.registry import ASSETS, PICKER, find_drafter, supported_bases
from dflash.replay import SPEEDS, at, duration, schedule
from dflash.guard import has_surrogate
from dflash.server import add_listen_args, check_listen, create_app, preload
from dflash.server import run as run_server
from dflash.ui import (CSS, LABELS, Race, Run, acceptance_histogram, cycles_chart, metrics_html, named_ids,
                       pane_html, pane_state, position_chart, race_chart, race_views, results_markdown,
                       tree_cycle, verdict_html)
from dflash.tree_view import message_figure, tree_figure
from dflash.verdict import first_divergence, logit_margin
from dflash.worker import Status, Worker, pair_key

# seconds between streamed updates. A chart update redraws the whole plot in the browser (~0.15 s
# of a busy CPU), a page busy drawing misses clicks such as Stop, and the panes already show the
# live speed: the race chart every 3 s, the per-cycle charts once, at the run's end
PANE_EVERY, CHART_EVERY = 0.25, 3.0
# a replay's frame interval; the race chart's cursor every 10th frame (a redraw: see CHART_EVERY)
REPLAY_EVERY, REPLAY_CHART_FRAMES = 0.1, 10
HISTORY = 20  # races a session keeps for replay
MAX_PROMPT_CHARS = 100_000  # the run tokenizes on the model's thread; longer prompts: the API
CUSTOM = "Custom target + drafter…"
LOOPBACK = ("127.0.0.1", "localhost", "::1")
EXAMPLES = {"target": "mlx-community/Qwen3-4B-4bit", "drafter": "z-lab/Qwen3-4B-DFlash-b16"}
CUSTOM_OFF = ("Custom models are off on this server: pick a pair from the list (whoever started the app "
              "can allow custom paths with --allow-custom-models).")
NO_NETWORK = ("No network: a Hub pair downloads once, then works offline. The embedded pair always works "
              "offline: pick it, or try again when this machine is online.")

# what each handler writes (names of the components in `build_demo`)
VIEWS = ("status", "target", "dflash", "verdict", "metrics", "race", "cycles", "hist", "pos", "data")
RUN_OUT = VIEWS + ("history", "past", "model", "loaded", "tree_plot", "tree_cycle")
TREES = ("auto", "chain", "4", "8", "16", "32", "64")  # the tree budget control's choices
CHOOSE_OUT = ("status", "model", "loaded")

FALLBACK_PRESETS = {
    "chat": "What are three simple ways to get better sleep? Keep it short.",
    "code": "Write a Python function `is_prime(n)` with a docstring, then show how to use it.",
    "math": "A shop sells pencils at 3 for $0.75. How much do 14 pencils cost? Think step by step.",
    "long": ("The Industrial Revolution began in Britain in the late 18th century. Steam engines, "
             "first used to pump water out of mines, were soon driving looms, mills and locomotives. "
             "Cities grew quickly as people left farms for factory work, and new canals and railways "
             "carried coal, cotton and iron across the country. Working conditions were often harsh: "
             "long hours, child labour and dangerous machines were common until reforms in the 19th "
             "century limited them.\n\nSummarize the passage above in three bullet points, then "
             "explain in two sentences why steam power mattered."),
}


def load_presets() -> dict[str, str]:
    """assets/presets.json ({"chat", "code", "math", "long"}: a prompt or {"prompt": ...}),
    falling back to built-in prompts for whatever it lacks."""
    try:
        data = json.loads((ASSETS / "presets.json").read_text())
    except (OSError, ValueError):
        data = {}
    presets = dict(FALLBACK_PRESETS)
    for name, value in data.items() if isinstance(data, dict) else ():
        text = value.get("prompt") if isinstance(value, dict) else value
        if isinstance(text, str) and text.strip():
            presets[name] = text
    return presets


def model_choices(model: Optional[str], draft: Optional[str], allow_custom: bool = True) -> dict[str, Optional[tuple]]:
    """Picker label -> (model, draft) as given to the worker (which keys pairs by `pair_key`, so the
    embedded pair picked here is the pair the app and its API loaded at startup)."""
    choices = dict(PICKER)
    if model or draft:
        choices = {f"Started with: {model or 'embedded target'} + {draft or 'registry drafter'}":
                   (model, draft), **choices}
    return {**choices, CUSTOM: None} if allow_custom else choices


def parse_settings(prompt, max_tokens, block_size, temperature, seed, adaptive=False,
                   tree="chain", lookup=True) -> GenerationConfig:
    """The UI's values as a validated config; ValueError with a message for the user. `tree`:
    "auto" (this host's default: sized per cycle, 64 nodes on a CUDA GPU), "chain" (the
    block size and adaptive switch apply) or a node count;
    `lookup`: trees also verify a copy from the context."""
    if not isinstance(prompt, str) or not prompt.strip():
        raise ValueError("The prompt is empty: type something or pick a preset.")
    if len(prompt) > MAX_PROMPT_CHARS:
        raise ValueError(f"The prompt has {len(prompt)} characters: the playground takes up to {MAX_PROMPT_CHARS}.")
    if has_surrogate(prompt):
        raise ValueError("The prompt holds a lone UTF-16 surrogate (\\ud800-\\udfff), which is not text.")
    try:
        n, b, s = int(max_tokens), int(block_size), int(seed)
        temp = float(temperature)
    except (TypeError, ValueError):
        raise ValueError("Max new tokens, block size and seed must be whole numbers, temperature a number.") from None
    if not 1 <= n <= MAX_TOKENS_LIMIT:
        raise ValueError(f"Max new tokens must be in 1..{MAX_TOKENS_LIMIT} (got {n}).")
    if not 2 <= b <= 64:
        raise ValueError(f"Block size must be in 2..64 (got {b}).")
    if s < 0:
        raise ValueError(f"Seed must be 0 or more (got {s}).")
    if str(tree) not in TREES:
        raise ValueError(f"Tree budget must be one of {', '.join(TREES)} (got {tree!r}).")
    if tree == "chain":
        return GenerationConfig("target", n, b, temp, 1.0, s, adaptive=bool(adaptive), tree=0).validate()
    return GenerationConfig("target", n, None, temp, 1.0, s, tree=None if tree == "auto" else int(tree),
                            lookup=bool(lookup)).validate()


def explain(e: Exception) -> str:
    """An error as something the user can act on (a Hub library's whole message is not)."""
    names, x = set(), e
    while x is not None and len(names) < 16:
        names.add(type(x).__name__)
        x = x.__cause__ or x.__context__
    if names & {"LocalEntryNotFoundError", "OfflineModeIsEnabled", "ConnectError", "ConnectionError",
                "ConnectTimeout", "ReadTimeout"}:
        return NO_NETWORK
    if names & {"RepositoryNotFoundError", "GatedRepoError"}:
        return "That Hub repository does not exist or needs a login: check the id."
    lines = str(e).strip().splitlines()
    message = lines[0] if lines else type(e).__name__
    return message if len(message) <= 300 else message[:300] + "…"


def load_average() -> Optional[float]:
    """The host's 1-minute load average (None where the OS keeps none)."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def machine_name() -> str:
    """The device the runs are timed on, for the copied results."""
    import mlx.core as mx

    try:
        name = mx.device_info().get("device_name") or ""
    except Exception:
        name = ""
    return f"{name or 'unknown device'} ({'CPU' if on_cpu() else 'GPU'}, {os.cpu_count()} cores, " \
           f"MLX {mx.__version__})"


class Control:
    """One session's running request: Stop sets the flag; the worker checks it between cycles."""

    def __init__(self, kind: str = "run"):
        self.kind = kind
        self.stopped = False
        self.superseded = False  # another request of this session took the panes over
        self.job = None

    def cancel(self, superseded: bool = False) -> None:
        self.stopped = True
        self.superseded = self.superseded or superseded
        if self.job is not None:
            self.job.cancel()


class Turns:
    """First come, first served: one session at a time uses the worker (a race is two runs that
    must not interleave with another session's); the others see their place in line."""

    def __init__(self):
        self._line: list[Control] = []
        self._cond = threading.Condition()

    def wait(self, ctl: Control, every: float = 0.5) -> Iterator[int]:
        """Yield how many are ahead of `ctl` until it is first in line (or stopped)."""
        with self._cond:
            self._line.append(ctl)
        while True:
            with self._cond:
                ahead = self._line.index(ctl)
            if ahead == 0 or ctl.stopped:
                return
            yield ahead
            with self._cond:
                self._cond.wait_for(lambda: self._line.index(ctl) < ahead or ctl.stopped, timeout=every)

    def leave(self, ctl: Control) -> None:
        with self._cond:
            if ctl in self._line:
                self._line.remove(ctl)
                self._cond.notify_all()


def frame(names=RUN_OUT, **changed) -> tuple:
    """One streamed update of the outputs `names`: the given values, gr.skip() for the others."""
    return tuple(changed.get(name, gr.skip()) for name in names)


def history_update(history: list[Race]) -> dict:
    labels = [f"#{len(history) - i}: {race_label(r)}" for i, r in enumerate(history)]
    return gr.update(choices=labels, value=labels[0] if labels else None)


def race_label(race: Race) -> str:
    speedup = race.speedup()
    how = f"{speedup:.2f}×" if speedup else "stopped" if race.stopped else "–"
    prompt = " ".join(race.prompt.split())
    return f"{how}, {race.dflash.n_tokens or race.target.n_tokens} tokens, “{prompt[:40]}”"


def final_status(race: Race) -> str:
    if race.stopped:
        return "■ Stopped. The panes show what was produced; Replay race plays it back."
    status = "✓ Done."
    if race.dflash.prefill and race.dflash.prefill.note:
        status += f" Note: {race.dflash.prefill.note}."
    if race.speedup():
        status += f" DFlash decoded at {race.speedup():.2f}× the target-only speed"
        status += "; outputs identical." if race.divergence is None else f"; outputs differ from token {race.divergence}."
        if race.trust()[1]:
            status += " Busy host: the speeds are noisy, run again (Measured with, under the metrics)."
    return status


class Playground:
    """The playground's handlers, apart from the layout so that tests can call them directly.

    `choices`: picker label -> (model, draft); `allow_custom`: whether a client may name its own
    target / drafter (a directory on this machine or any Hub id)."""

    def __init__(self, worker: Worker, choices: dict, allow_custom: bool, machine: str = ""):
        self.worker, self.choices, self.allow_custom = worker, choices, allow_custom
        self.margin = logit_margin  # a sharded target's rank 0: Rank0.margin (every rank prefills)
        self.machine = machine or machine_name()
        self.turns = Turns()
        self.active: dict[str, Control] = {}

    # ---- sessions --------------------------------------------------------------------------

    def _begin(self, request, kind: str) -> Control:
        """The session's new request; a replay never interrupts a run, a run ends a replay."""
        session = getattr(request, "session_hash", None)
        old = self.active.get(session)
        if old is not None and not old.stopped:
            if kind == "replay" and old.kind != "replay":
                raise ValueError("A run is in progress: replay it when it ends (or press Stop).")
            old.cancel(superseded=True)
        ctl = self.active[session] = Control(kind)
        return ctl

    def _end(self, request, ctl: Control) -> None:
        self.turns.leave(ctl)
        ctl.cancel()  # only sets flags: this may run on the event loop (docs/playground.md: Stop)
        session = getattr(request, "session_hash", None)
        if self.active.get(session) is ctl:
            del self.active[session]

    def stop(self, request: gr.Request = None) -> None:
        ctl = self.active.get(getattr(request, "session_hash", None))
        if ctl is not None:
            ctl.cancel()

    def _failed(self, e: Exception, names=RUN_OUT, **changed) -> tuple:
        if not isinstance(e, ValueError):
            traceback.print_exc()
        message = explain(e)
        gr.Warning(message)
        return frame(names, status=f"⚠ {message}", **changed)

    # ---- which pair ------------------------------------------------------------------------

    def pick(self, choice, custom_target, custom_draft) -> tuple:
        """(model, draft) for the worker; ValueError saying what to do when it cannot be loaded."""
        if choice not in (*self.choices, CUSTOM):  # an id typed into the picker: a custom target
            if not self.allow_custom:
                raise ValueError(f"{str(choice)[:200]} was not loaded. {CUSTOM_OFF}")
            choice, custom_target = CUSTOM, str(choice or "")
        elif choice != CUSTOM:
            return self.choices[choice]
        if not self.allow_custom:
            raise ValueError(CUSTOM_OFF)
        target, draft = (custom_target or "").strip(), (custom_draft or "").strip() or None
        if not target:
            raise ValueError(f"Custom model: give a target (an mlx-lm directory or a Hub id such as "
                             f"{EXAMPLES['target']}).")
        for what, name in (("target", target), ("drafter", draft)):
            if name and name.startswith((".", "/", "~")) and not Path(name).expanduser().exists():
                raise ValueError(f"The {what} path {name} does not exist on this machine: give a directory "
                                 f"that does, or a Hub id such as {EXAMPLES[what]}.")
        if draft is None and find_drafter(target) is None:
            raise ValueError(f"No DFlash drafter is known for {target}: give one in the drafter box (a directory "
                             f"or a Hub id), or pick a target of: {supported_bases()}.")
        return target, draft

    def typed(self, choice, loaded=None) -> tuple:
        """The picker's value changed: a listed pick shows or hides the custom boxes; a typed id
        goes into the target box (or, with custom models off, is named and refused)."""
        if choice in self.choices:
            return gr.update(visible=choice == CUSTOM), gr.skip(), gr.skip(), gr.skip()
        target = str(choice or "").strip()
        try:
            self.pick(choice, None, None)
            said = f"Custom target {target}: Run loads it with the registry's drafter."
        except ValueError as e:
            said = f"⚠ {e}"
        if not self.allow_custom:
            return gr.update(visible=False), gr.skip(), said, gr.update(value=loaded)
        return gr.update(visible=True), target, said, gr.update(value=CUSTOM)

    def _load(self, key: tuple):
        """The worker's load of pair `key` (Status lines, then the pair); a failure names the pair."""
        try:
            return (yield from self.worker.prepare(*key))
        except Exception as e:
            if not isinstance(e, ValueError):
                traceback.print_exc()
            why = explain(e)
        # raised outside the handler, so that explain() reads this message, not its cause's
        raise ValueError(f"{' + '.join(filter(None, key)) or 'The embedded pair'} did not load: {why}")

    def choose(self, choice, loaded=None):
        """Prepare the picked pair right away, with progress (a Hub pair downloads here); on
        failure, say what to do and put the picker back on the pair still loaded."""
        if choice == CUSTOM:
            yield frame(CHOOSE_OUT, status="Give a target and (optionally) a drafter, then Run.")
            return
        ctl = Control("load")  # not the session's run: Stop and a new run leave a load alone
        try:
            key = self.pick(choice, None, None)
            for ahead in self.turns.wait(ctl):
                yield frame(CHOOSE_OUT, status=f"⏳ Waiting for another run (position {ahead} in line)…")
            for item in self._load(key):
                if isinstance(item, Status):
                    yield frame(CHOOSE_OUT, status=f"⏳ {item.message}")
            yield frame(CHOOSE_OUT, status=f"✓ {choice} is ready.", loaded=choice)
        except Exception as e:  # a failed load: the loaded pairs stay (Worker.pair)
            revert = gr.update(value=loaded) if loaded and loaded != choice else gr.skip()
            yield self._failed(e, CHOOSE_OUT, model=revert)
        finally:
            self.turns.leave(ctl)

    # ---- a race ----------------------------------------------------------------------------

    def run(self, prompt, max_tokens, block_size, temperature, seed, chat, choice, custom_target, custom_draft,
            adaptive, history=None, loaded=None, tree="auto", lookup=True, request: gr.Request = None):
        """Target-only, then DFlash, streamed into the panes; the race joins the session's history."""
        ctl, history = self._begin(request, "run"), list(history or [])
        try:
            cfg = parse_settings(prompt, max_tokens, block_size, temperature, seed, adaptive, tree, lookup)
            key = self.pick(choice, custom_target, custom_draft)
            for ahead in self.turns.wait(ctl):
                yield frame(status=f"⏳ Waiting for another run (position {ahead} in line)…")
            if ctl.stopped:
                yield frame(status="■ Stopped before the run began.")
                return
            race = yield from self._race(ctl, prompt, cfg, bool(chat), key, choice)
            if ctl.superseded:
                return
            history = [race, *history][:HISTORY]
            cycle, _ = tree_cycle(race)
            yield frame(status=final_status(race), **race_views(race), history=history,
                        past=history_update(history), loaded=choice if choice != CUSTOM else gr.skip(),
                        tree_plot=self.tree(history, 0, None), tree_cycle=str(cycle.index + 1) if cycle else "")
        except Exception as e:  # bad input or a failed load: tell the user, keep serving
            revert = gr.update(value=loaded) if loaded and choice not in (loaded, CUSTOM) else gr.skip()
            yield self._failed(e, model=revert)
        finally:
            self._end(request, ctl)

    def _race(self, ctl: Control, prompt: str, cfg: GenerationConfig, chat: bool, key: tuple, label: str):
        """Both runs on the one worker (each timed alone); returns the recorded Race."""
        runs, load = {"target": Run("target"), "dflash": Run("dflash")}, load_average()
        yield frame(status="⏳ Preparing the model…", target=pane_html(None, "target", state="waiting"),
                    dflash=pane_html(None, "dflash", state="waiting"), verdict=verdict_html(None, None),
                    metrics=metrics_html(None, None), race=None, cycles=None, hist=None, pos=None, data=None)
        decode = yield from self._prepare(ctl, key)
        for step, mode in enumerate(runs, 1):
            if not ctl.stopped:
                ctl.job = self.worker.generate(prompt, replace(cfg, mode=mode), *key, chat_template=chat)
                yield from self._stream(ctl, runs, mode, decode, f"▶ Running {LABELS[mode]} ({step} of 2)…")
        settings = {k: v for k, v in asdict(cfg).items() if k != "mode" and v is not None} | {"chat_template": chat}
        if cfg.wants_tree() and cfg.tree is None:
            settings["tree"] = "auto"  # the engine's default for this host
        pair = label if label != CUSTOM else " + ".join(filter(None, key))
        race = Race(runs["target"], runs["dflash"], prompt, settings, pair, self.machine, stopped=ctl.stopped,
                    cores=os.cpu_count() or 0)
        if load is not None and (end := load_average()) is not None:
            race.load = (load, end)
        t, d = race.target.summary, race.dflash.summary
        if t and d:
            n = min(t.tokens, d.tokens) if race.stopped else None  # a stopped race: what both produced
            race.divergence = first_divergence(t.token_ids[:n], d.token_ids[:n])
        if race.divergence is not None and cfg.temperature == 0 and not race.stopped:
            yield frame(status=f"⏳ Outputs differ at token {race.divergence}: measuring the target's logit "
                               f"margin there…")
            race.margin = self._margin(key, prompt, chat, t.token_ids[: race.divergence])
        race.texts = {i: decode(i) for i in named_ids(race)} if decode else {}
        return race

    def _prepare(self, ctl: Control, key: tuple):
        """Load the pair on the worker (Status lines on the way); returns a decode(id) function."""
        pair = None
        for item in self._load(key):
            if isinstance(item, Status):
                yield frame(status=f"⏳ {item.message}")
            else:
                pair = item
            if ctl.stopped:  # the load goes on in the background; its pair stays for later
                return None
        return lambda i: pair.tokenizer.decode([i])

    def _stream(self, ctl: Control, runs: dict, mode: str, decode, status: str):
        """One run's events into its pane and the charts, throttled; complete at its Summary (a
        stopped run ends with one too, finish "cancelled", within a cycle)."""
        if ctl.stopped:
            ctl.job.cancel()
        run = runs[mode]
        said = status
        yield frame(status=said, **{mode: pane_html(run, mode, decode, "prefill…")})
        last_pane = last_chart = 0.0
        for ev in ctl.job:
            if isinstance(ev, Status):
                said = f"⏳ {ev.message}"
                yield frame(status=said)
                continue
            run.add(ev)
            done, now = isinstance(ev, Summary), monotonic()
            if not done and now - last_pane < PANE_EVERY:
                continue
            update = {mode: pane_html(run, mode, decode, pane_state(run))}
            if done or now - last_chart >= CHART_EVERY:
                update["race"] = race_chart(list(runs.values()))
                last_chart = now
            if done:
                update["metrics"] = metrics_html(runs["target"].summary, runs["dflash"].summary)
                if mode == "dflash":
                    update.update(cycles=cycles_chart(run), hist=acceptance_histogram(run), pos=position_chart(run))
            last_pane = now
            # after Stop, never write "Running" over the stop message (updates race the cancel)
            if (now_said := "■ Stopping…" if ctl.stopped else status) != said:
                update["status"] = said = now_said
            yield frame(**update)

    def _margin(self, key: tuple, prompt: str, chat: bool, prefix: tuple):
        def work(progress):
            pair = self.worker.pair(*key, progress)
            return self.margin(pair, encode_prompt(pair.tokenizer, prompt, chat), prefix)

        return [item for item in self.worker.call(work) if not isinstance(item, Status)][-1]

    # ---- replay and results ----------------------------------------------------------------

    def replay(self, history, index, speed, request: gr.Request = None):
        """Both panes again, together, at the race's recorded times (x speed): a view of the
        recorded events; the race chart's cursor follows the clock. Ends on the live run's view."""
        try:
            race = self._recorded(history, index)
            factor = SPEEDS.get(speed)
            if factor is None:
                raise ValueError(f"Replay speed must be one of {', '.join(SPEEDS)} (got {speed!r}).")
            ctl = self._begin(request, "replay")
        except ValueError as e:
            yield self._failed(e, VIEWS)
            return
        try:
            total, start = duration(race.runs), monotonic()
            views = race_views(race)
            yield frame(VIEWS, verdict=verdict_html(None, None), metrics=metrics_html(None, None),
                        **{k: views[k] for k in ("cycles", "hist", "pos", "data")})
            shown = None
            for k, (wall, clock) in enumerate(schedule(total, factor, REPLAY_EVERY)):
                sleep(max(0.0, start + wall - monotonic()))
                if ctl.stopped:
                    break
                update = {}
                if (seen := [(at(run, clock) is run, at(run, clock).n_tokens) for run in race.runs]) != shown:
                    update, shown = {mode: replay_pane(race, mode, clock) for mode in LABELS}, seen
                if k % REPLAY_CHART_FRAMES == 0 or clock == total:
                    update["race"] = race_chart(race.runs, clock)
                yield frame(VIEWS, status=f"▶ Replay at {speed}: {clock:.2f} s of {total:.2f} s", **update)
            if not ctl.superseded:
                done = "■ Replay stopped." if ctl.stopped else f"✓ Replayed at {speed}."
                yield frame(VIEWS, status=f"{done} {final_status(race)}", **views)
        finally:
            self._end(request, ctl)

    @staticmethod
    def _recorded(history, index) -> Race:
        races = history or []
        if not races:
            raise ValueError("Nothing to replay yet: run a race first.")
        if not isinstance(index, int) or not 0 <= index < len(races):
            raise ValueError("Pick a race from the list to replay.")
        return races[index]

    def tree(self, history, index, number):
        """The drafted tree of one DFlash cycle of a recorded race (None: the most telling one),
        or a figure saying why there is none."""
        if not history:
            return message_figure("Run a race first: this draws one of its DFlash cycles.")
        try:
            race = self._recorded(history, index if index is not None else 0)
        except ValueError as e:
            return message_figure(str(e))
        try:
            n = None if number in (None, "") else int(number)
        except (TypeError, ValueError, OverflowError):
            return message_figure(f"The cycle must be a whole number (got {number}).")
        cycle, staged = tree_cycle(race, n)
        cycles = len(race.dflash.cycles)
        if cycle is not None:
            return tree_figure(cycle, race.decode, staged)
        if not cycles:
            return message_figure("This race's DFlash run has no cycles (it was stopped before them).")
        if n is None:
            return message_figure("This race's DFlash run verified no tree: type a cycle number to see one.")
        return message_figure(f"There is no cycle {n}: this race's DFlash run has cycles 1 to {cycles}.")

    def results(self, history, index) -> str:
        """The race's summary as markdown, for a slide or an issue comment."""
        try:
            return results_markdown(self._recorded(history, index if index is not None else 0))
        except ValueError as e:
            return str(e)


def replay_pane(race: Race, mode: str, clock: float) -> str:
    """A pane as it stood at `clock`: growing, then exactly the live run's last view."""
    run = getattr(race, mode)
    view = at(run, clock)
    return pane_html(view, mode, race.decode, pane_state(run, race.stopped) if view is run else "▶ replay")


# ---- layout ----------------------------------------------------------------------------------

HEADER = """
<div style="display:flex;align-items:baseline;gap:14px;flex-wrap:wrap">
  <h1 style="margin:0;font-size:26px">DFlash playground</h1>
  <span style="color:var(--body-text-color-subdued)">A small drafter fills a whole block of tokens in one
  pass; the target checks the block in one pass and keeps the prefix it agrees with. Every token is the
  target's own choice, so the output should match the target alone, only sooner.</span>
</div>"""
# one warning at a time: Gradio stacks its toasts, newest last; the newest replaces the others
TOAST_CSS = """
.toast-wrap > .toast-item:not(:last-child), .toast-messages > .toast-message-item:not(:last-child),
.toast-separator, .toast-count { display: none !important; }
"""
# the clipboard needs a secure context (localhost or https); elsewhere the text box's copy button
COPY_JS = "(text) => { if (navigator.clipboard) navigator.clipboard.writeText(text).catch(() => {}); }"


def build_demo(worker: Worker, model: Optional[str] = None, draft: Optional[str] = None,
               allow_custom: bool = True, ranks=None) -> gr.Blocks:
    """The playground's Blocks. `model` / `draft`: the pair the app started with (None: embedded);
    `allow_custom`: whether clients may name their own target / drafter; `ranks`: a sharded
    target's cluster.Rank0 (then only the started pair, which every rank loaded, is offered)."""
    choices = model_choices(model, draft, allow_custom and ranks is None)
    if ranks is not None:
        choices = {k: v for k, v in choices.items() if v and pair_key(*v) == pair_key(model, draft)}
    pg = Playground(worker, choices, allow_custom and ranks is None)
    if ranks is not None:
        pg.margin = ranks.margin
    presets = load_presets()
    c = SimpleNamespace()  # the components, by the names the handlers' outputs use
    with gr.Blocks(title="DFlash playground") as demo:
        gr.HTML(HEADER)
        with gr.Row():
            with gr.Column(scale=3):
                _prompt_panel(c, presets)
            with gr.Column(scale=2):
                _settings_panel(c, pg.choices)
        _views(c)
        _wire(pg, c, presets)
    return demo


def _prompt_panel(c, presets: dict) -> None:
    with gr.Row():
        c.presets = {name: gr.Button(name.capitalize() + (" prompt" if name == "long" else ""), size="sm",
                                     elem_id=f"preset-{name}") for name in presets}
    c.prompt = gr.Textbox(presets.get("chat", ""), label="Prompt", lines=6, max_lines=14, elem_id="prompt",
                          max_length=MAX_PROMPT_CHARS)
    with gr.Row():
        c.run_btn = gr.Button("Run both", variant="primary", elem_id="run-btn", scale=3)
        c.stop_btn = gr.Button("Stop", variant="stop", elem_id="stop-btn", scale=1)
    c.status = gr.Textbox(label="Status", interactive=False, elem_id="status", max_lines=3)


def _settings_panel(c, choices: dict) -> None:
    first = next(iter(choices))
    c.model = gr.Dropdown(list(choices), value=first, label="Model pair (target + drafter)", elem_id="model",
                          allow_custom_value=True)  # a typed Hub id or directory: a custom target
    c.loaded = gr.State(first)  # the picked pair that loaded: the picker returns to it after a failure
    with gr.Group(visible=False) as c.custom_box:
        c.custom_target = gr.Textbox("", label="Target: mlx-lm directory or Hub id", placeholder=EXAMPLES["target"],
                                     elem_id="custom-target")
        c.custom_draft = gr.Textbox("", label="Drafter: directory or Hub id (empty: from the registry)",
                                    placeholder=EXAMPLES["drafter"])
    with gr.Row():
        c.max_tokens = gr.Slider(1, MAX_TOKENS_LIMIT, 128, step=1, label="Max new tokens", elem_id="max-tokens",
                                 info=f"1–{MAX_TOKENS_LIMIT}, as in the CLI and the API", scale=3)
        c.seed = gr.Number(0, label="Seed", precision=0, minimum=0, elem_id="seed", scale=1, min_width=90)
    # folded: the defaults suit a first run, and the output then starts on the first screen
    with gr.Accordion("More settings (tree, block size, temperature…)", open=False,
                      elem_id="more-settings"):
        with gr.Row():  # how DFlash verifies
            c.tree = gr.Dropdown(list(TREES), value="auto", label="Tree budget", elem_id="tree",
                                 info="drafted nodes verified per pass; auto: sized per cycle from measured "
                                      "costs (64 on a CUDA GPU)")
            c.block_size = gr.Slider(2, 16, default_block_size(DEFAULT_BLOCK_SIZE), step=1,
                                     label="Block size (chain)", elem_id="block-size",
                                     info="with Tree budget = chain: ≤ the drafter's block")
            c.temperature = gr.Slider(0, 2, 0, step=0.05, label="Temperature", info="0 = greedy",
                                      elem_id="temperature")
        c.chat = gr.Checkbox(True, label="Chat template (wrap the prompt as a user turn)")
        c.lookup = gr.Checkbox(True, elem_id="lookup", label="Copy from the context (trees also verify what "
                               "followed the text's last tokens where they occurred before)")
        c.adaptive = gr.Checkbox(False, elem_id="adaptive", label="Adaptive chain length (≤ block size, from "
                                 "measured costs; plain target steps when drafting does not pay)")


def _replay_bar(c) -> None:
    c.history = gr.State([])  # this session's races, newest first
    with gr.Row(equal_height=True):
        c.past = gr.Dropdown([], value=None, type="index", label="This session's races", elem_id="past", scale=4)
        c.speed = gr.Radio(list(SPEEDS), value="1×", label="Replay speed", elem_id="speed", scale=3)
        with gr.Column(scale=2, min_width=160):
            c.replay_btn = gr.Button("▶ Replay race", elem_id="replay-btn")
            c.copy_btn = gr.Button("Copy results", size="sm", elem_id="copy-btn")


def _views(c) -> None:
    with gr.Row(equal_height=False):
        c.target = gr.HTML(pane_html(None, "target"), elem_id="target-pane")
        c.dflash = gr.HTML(pane_html(None, "dflash"), elem_id="dflash-pane")
    c.verdict = gr.HTML(verdict_html(None, None), elem_id="verdict")
    _replay_bar(c)
    with gr.Row(equal_height=False):
        with gr.Column(scale=2):
            c.metrics = gr.HTML(metrics_html(None, None), elem_id="metrics")
        with gr.Column(scale=3):
            c.race = gr.Plot(label="Race", elem_id="race-plot", show_label=False)
    with gr.Row():
        c.cycles = gr.Plot(elem_id="cycles-plot", show_label=False)
        c.hist = gr.Plot(elem_id="hist-plot", show_label=False)
        c.pos = gr.Plot(elem_id="pos-plot", show_label=False)
    with gr.Row(equal_height=False):  # one cycle's drafted tree: why each token was accepted or corrected
        # a Textbox: a Number shows "0" for no value
        c.tree_cycle = gr.Textbox("", label="Cycle", placeholder="empty: the most telling", max_lines=1,
                                  elem_id="tree-cycle", scale=0, min_width=220)
        c.tree_btn = gr.Button("Show the drafted tree", size="md", elem_id="tree-btn", scale=0, min_width=230)
    c.tree_plot = gr.Plot(elem_id="tree-plot", show_label=False)
    with gr.Accordion("Results as markdown (Copy results)", open=False) as c.results_box:
        c.results = gr.Textbox(lines=14, show_label=False, buttons=["copy"], elem_id="results-md")
    with gr.Accordion("Raw summaries (JSON, as the engine reported them)", open=False):
        c.data = gr.JSON(elem_id="data")


def _wire(pg: Playground, c, presets: dict) -> None:
    """The events. Runs and model loads wait in the playground's own line (`Turns`), so a queued
    session sees its place in the status box rather than only Gradio's overlay."""
    def out(names):
        return [getattr(c, name) for name in names]

    inputs = [c.prompt, c.max_tokens, c.block_size, c.temperature, c.seed, c.chat, c.model, c.custom_target,
              c.custom_draft, c.adaptive, c.history, c.loaded, c.tree, c.lookup]
    c.run_btn.click(pg.run, inputs, out(RUN_OUT), api_name="run", concurrency_limit=None, show_progress="minimal")
    c.stop_btn.click(pg.stop, None, None, api_name="stop", concurrency_limit=None)
    c.tree_btn.click(pg.tree, [c.history, c.past, c.tree_cycle], c.tree_plot, api_name="tree", queue=False)
    c.replay_btn.click(pg.replay, [c.history, c.past, c.speed], out(VIEWS), api_name="replay",
                       concurrency_limit=None, show_progress="hidden")
    c.copy_btn.click(lambda history, i: (pg.results(history, i), gr.update(open=True)), [c.history, c.past],
                     [c.results, c.results_box], api_name="results", queue=False).then(None, c.results, js=COPY_JS)
    for name, btn in c.presets.items():
        btn.click(lambda text=presets[name]: text, None, c.prompt, api_visibility="private", queue=False)
    c.model.change(pg.typed, [c.model, c.loaded], [c.custom_box, c.custom_target, c.status, c.model],
                   api_visibility="private", queue=False)
    # .select, not .input: Gradio's dropdown fires .input twice for one pick (two loads, two toasts)
    c.model.select(pg.choose, [c.model, c.loaded], out(CHOOSE_OUT), api_name="choose", concurrency_limit=None)


def mount(demo: gr.Blocks, worker: Worker, args, cluster: Optional[dict] = None):
    """The UI and the OpenAI-compatible API (/v1) as one app, sharing the worker, behind the API's
    guard (dflash/guard.py: foreign origins and hosts, non-JSON posts, uploads, big bodies)."""
    theme = gr.themes.Soft(primary_hue="emerald", secondary_hue="slate")
    demo.queue(default_concurrency_limit=1)
    api = create_app(worker, args.model, args.draft, cluster, args.host, args.allow_origin)
    # no file inputs: the guard refuses uploads, and Gradio's own limit would refuse any byte
    return gr.mount_gradio_app(api, demo, path="/", theme=theme, css=CSS + TOAST_CSS, max_file_size=0)


def serve(demo: gr.Blocks, worker: Worker, args, cluster: Optional[dict] = None, on_stop=None) -> None:
    """Serve mount()'s app; SIGTERM stops both promptly (server.run). `cluster`, `on_stop`: a
    sharded target's (--distributed)."""
    app = mount(demo, worker, args, cluster)
    url = f"http://{args.host}:{args.port}"
    print(f"* Running on local URL:  {url}  (OpenAI-compatible API: {url}/v1)", flush=True)
    run_server(app, args.host, args.port, on_stop=on_stop, log_level="warning")


def custom_models_allowed(host: str, flag: Optional[bool]) -> bool:
    """Clients name their own models (any directory here, any Hub id) only when the operator said
    so, or when only this machine can reach the app."""
    return flag if flag is not None else host in LOOPBACK


def main(argv=None) -> int:
    p = ArgumentParser(description="DFlash playground: target-only vs DFlash, side by side.")
    add_listen_args(p, 7860)
    p.add_argument("--model", default=None, help="target: mlx-lm directory or Hub id (default: embedded SmolLM2)")
    p.add_argument("--draft", default=None, help="drafter: directory or Hub id (default: from the registry)")
    p.add_argument("--allow-custom-models", action=argparse.BooleanOptionalAction, default=None,
                   help="let clients load a directory or Hub id they name (default: only when bound to "
                        "127.0.0.1 / localhost)")
    add_distributed_arg(p)
    args = p.parse_args(argv)
    allow_custom = custom_models_allowed(args.host, args.allow_custom_models)

    ranks = None
    if args.distributed:  # rank 0 serves; the others follow its requests here until it stops
        try:
            ranks = serve_ranks(args.distributed, args.model, args.draft)
        except ValueError as e:
            print(f"error: {explain(e)}", file=sys.stderr)
            return 2
        if ranks is None:
            return 0
    if (why := check_listen(args.host, args.port)) is not None:
        print(f"error: {why}", file=sys.stderr)
        return 2
    worker = ranks.worker if ranks else Worker()
    worker.pin(args.model, args.draft)  # the API serves this pair: playground picks never evict it
    print(f"Preparing target {args.model or 'embedded SmolLM2-135M-Instruct'} + drafter "
          f"{args.draft or '(from the registry)'}…", flush=True)
    try:  # the first start converts / downloads; later starts only load
        pair = preload(worker, args.model, args.draft, progress=lambda message: print(f"  {message}", flush=True))
        cluster = ranks.record(pair) if ranks else None
    except Exception as e:
        print(f"error: {explain(e)}", file=sys.stderr)
        return 2
    serve(build_demo(worker, args.model, args.draft, allow_custom, ranks), worker, args, cluster,
          on_stop=ranks and ranks.stop)
    return 0


if __name__ == "__main__":
    sys.exit(main())
