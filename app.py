"""The DFlash playground: the same prompt through the target alone and through DFlash, side by side.

    python app.py                      # the embedded SmolLM2-135M-Instruct pair
    python app.py --model DIR_OR_HUB_ID --draft DIR_OR_HUB_ID --port 7860

Both runs go through the one MLX worker thread, one after the other, so each speed is the run's
own. Everything shown is a view of the engine's events (`dflash/ui.py`). When `dflash/server.py`
exists, its OpenAI-compatible API is served by the same process, on the same loaded models.
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from dataclasses import asdict, replace
from time import monotonic
from typing import Optional

import gradio as gr

from dflash.config import DEFAULT_BLOCK_SIZE, GenerationConfig, default_block_size
from dflash.events import Summary
from dflash.load import encode_prompt
from dflash.registry import ASSETS, BUILTIN_DRAFTER, BUILTIN_TARGET, PICKER
from dflash.ui import (CSS, LABELS, Run, acceptance_histogram, cycles_chart, metrics_html, pane_html,
                       position_chart, race_chart, verdict_html)
from dflash.verdict import first_divergence, logit_margin
from dflash.worker import Status, Worker

PANE_EVERY, CHART_EVERY = 0.2, 0.5  # seconds between streamed updates (UI-NOTES: throttle)
MAX_NEW_TOKENS = 1024
CUSTOM = "Custom target + drafter…"
OUTPUTS = ("status", "target", "dflash", "verdict", "metrics", "race", "cycles", "hist", "pos", "data")

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


def model_choices(model: Optional[str], draft: Optional[str]) -> dict[str, Optional[tuple]]:
    """Picker label -> (model, draft) as given to the worker. The embedded pair is (None, None),
    the key the app (and the API server) load at startup, so that one load serves all."""
    embedded = (BUILTIN_TARGET, str(BUILTIN_DRAFTER))
    choices = {label: (None, None) if pair == embedded else pair for label, pair in PICKER.items()}
    if model or draft:
        choices = {f"Started with: {model or 'embedded target'} + {draft or 'registry drafter'}":
                   (model, draft), **choices}
    return {**choices, CUSTOM: None}


def parse_settings(prompt, max_tokens, block_size, temperature, seed, adaptive=False) -> GenerationConfig:
    """The UI's values as a validated config; ValueError with a message for the user."""
    if not isinstance(prompt, str) or not prompt.strip():
        raise ValueError("The prompt is empty: type something or pick a preset.")
    try:
        n, b, s = int(max_tokens), int(block_size), int(seed)
        temp = float(temperature)
    except (TypeError, ValueError):
        raise ValueError("Max new tokens, block size and seed must be whole numbers, temperature a number.") from None
    if not 1 <= n <= MAX_NEW_TOKENS:
        raise ValueError(f"Max new tokens must be in 1..{MAX_NEW_TOKENS} (got {n}).")
    if not 2 <= b <= 64:
        raise ValueError(f"Block size must be in 2..64 (got {b}).")
    if s < 0:
        raise ValueError(f"Seed must be 0 or more (got {s}).")
    return GenerationConfig("target", n, b, temp, 1.0, s, adaptive=bool(adaptive)).validate()


class Control:
    """One session's running request: Stop sets the flag; the worker checks it between cycles."""

    def __init__(self):
        self.stopped = False
        self.job = None

    def cancel(self) -> None:
        self.stopped = True
        if self.job is not None:
            self.job.cancel()


def frame(**changed) -> tuple:
    """One streamed update: the given outputs, gr.skip() for the others."""
    return tuple(changed.get(name, gr.skip()) for name in OUTPUTS)


def build_demo(worker: Worker, model: Optional[str] = None, draft: Optional[str] = None) -> gr.Blocks:
    """The playground's Blocks. `model` / `draft`: the pair the app started with (None: embedded)."""
    presets = load_presets()
    choices = model_choices(model, draft)
    active: dict[str, Control] = {}

    def prepare(pair_key):
        """Load the pair on the worker (Status lines on the way); returns a decode(id) function."""
        tokenizer = None
        for item in worker.call(lambda progress: worker.pair(*pair_key, progress).tokenizer):
            if isinstance(item, Status):
                yield frame(status=f"⏳ {item.message}")
            else:
                tokenizer = item
        return lambda i: tokenizer.decode([i])

    def race(ctl, prompt, cfg, chat, pair_key):
        """Target-only, then DFlash, on the one worker (each timed alone), then the verdict."""
        runs = {"target": Run("target"), "dflash": Run("dflash")}
        yield frame(status="⏳ Preparing the model…", target=pane_html(None, "target", state="waiting"),
                    dflash=pane_html(None, "dflash", state="waiting"), verdict=verdict_html(None, None),
                    metrics=metrics_html(None, None), race=None, cycles=None, hist=None, pos=None, data=None)
        decode = yield from prepare(pair_key)
        for step, mode in enumerate(runs, 1):
            if not ctl.stopped:
                ctl.job = worker.generate(prompt, replace(cfg, mode=mode), *pair_key, chat_template=chat)
                yield from stream(ctl, runs, mode, decode, f"▶ Running {LABELS[mode]} ({step} of 2)…")

        t, d = runs["target"].summary, runs["dflash"].summary
        i = first_divergence(t.token_ids, d.token_ids) if t and d else None
        margin = None
        if i is not None and cfg.temperature == 0 and not ctl.stopped:
            yield frame(status=f"⏳ Outputs differ at token {i}: measuring the target's logit margin there…")
            margin = measure_margin(pair_key, prompt, chat, t.token_ids[:i])
        final = "■ Stopped." if ctl.stopped else "✓ Done."
        if t and d and t.decode_tok_s > 0 and not ctl.stopped:
            final += f" DFlash decoded at {d.decode_tok_s / t.decode_tok_s:.2f}× the target-only speed"
            final += "; outputs identical." if i is None else f"; outputs differ from token {i}."
        data = {"target": t and asdict(t), "dflash": d and asdict(d), "first_divergence": i, "logit_margin": margin}
        yield frame(status=final, verdict=verdict_html(t, d, decode, margin, cfg.temperature),
                    metrics=metrics_html(t, d), data=data)

    def stream(ctl, runs, mode, decode, status):
        """One run's events into its pane and the charts, throttled; complete at its Summary."""
        if ctl.stopped:
            ctl.job.cancel()
        run = runs[mode]
        yield frame(status=status, **{mode: pane_html(run, mode, decode, "prefill…")})
        last_pane = last_chart = 0.0
        for ev in ctl.job:
            if isinstance(ev, Status):
                yield frame(status=f"⏳ {ev.message}")
                continue
            run.add(ev)
            done, now = isinstance(ev, Summary), monotonic()
            if not done and now - last_pane < PANE_EVERY:
                continue
            update = {mode: pane_html(run, mode, decode, ev.finish_reason if done else "generating…")}
            if done or now - last_chart >= CHART_EVERY:
                update["race"] = race_chart(list(runs.values()))
                if mode == "dflash":
                    update.update(cycles=cycles_chart(run), hist=acceptance_histogram(run), pos=position_chart(run))
                last_chart = now
            if done:
                update["metrics"] = metrics_html(runs["target"].summary, runs["dflash"].summary)
            last_pane = now
            # after Stop, never write "Running" over the stop message (updates race the cancel)
            yield frame(status="■ Stopped." if ctl.stopped else status, **update)

    def measure_margin(pair_key, prompt, chat, prefix):
        def work(progress):
            pair = worker.pair(*pair_key, progress)
            return logit_margin(pair, encode_prompt(pair.tokenizer, prompt, chat), prefix)
        margin = None
        for item in worker.call(work):
            if not isinstance(item, Status):
                margin = item
        return margin

    def run(prompt, max_tokens, block_size, temperature, seed, chat, choice, custom_target, custom_draft,
            adaptive, request: gr.Request):
        ctl, session = Control(), request.session_hash
        active[session] = ctl
        try:
            cfg = parse_settings(prompt, max_tokens, block_size, temperature, seed, adaptive)
            yield from race(ctl, prompt, cfg, bool(chat), pick(choice, custom_target, custom_draft))
        except Exception as e:  # bad input or a failed load: tell the user, keep serving
            if not isinstance(e, ValueError):
                traceback.print_exc()
            gr.Warning(str(e))
            yield frame(status=f"⚠ {e}")
        finally:
            ctl.cancel()  # only sets flags: this may run on the event loop (UI-NOTES)
            if active.get(session) is ctl:
                del active[session]

    def pick(choice, custom_target, custom_draft) -> tuple:
        if choice == CUSTOM:
            if not (custom_target or "").strip():
                raise ValueError("Custom model: give a target (an mlx-lm directory or a Hub id).")
            return custom_target.strip(), (custom_draft or "").strip() or None
        if choice not in choices:
            raise ValueError(f"Unknown model choice {choice!r}.")
        return choices[choice]

    def stop(request: gr.Request):
        ctl = active.get(request.session_hash)
        if ctl is None:
            return gr.skip()
        ctl.cancel()
        return "■ Stopped."

    def choose(choice):
        """Prepare the chosen pair right away, with progress (a Hub pair downloads here)."""
        if choice == CUSTOM:
            yield "Give a target and (optionally) a drafter, then Run."
            return
        try:
            for item in worker.call(lambda progress: worker.pair(*choices[choice], progress) and None):
                if isinstance(item, Status):
                    yield f"⏳ {item.message}"
            yield f"✓ {choice} is ready."
        except Exception as e:
            gr.Warning(str(e))
            yield f"⚠ {e}"

    with gr.Blocks(title="DFlash playground") as demo:
        gr.HTML(_header())
        with gr.Row():
            with gr.Column(scale=3):
                with gr.Row():
                    preset_btns = {name: gr.Button(name.capitalize() + (" prompt" if name == "long" else ""),
                                                   size="sm", elem_id=f"preset-{name}")
                                   for name in presets}
                prompt = gr.Textbox(presets.get("chat", ""), label="Prompt", lines=6, max_lines=14,
                                    elem_id="prompt")
                with gr.Row():
                    run_btn = gr.Button("Run both", variant="primary", elem_id="run-btn", scale=3)
                    stop_btn = gr.Button("Stop", variant="stop", elem_id="stop-btn", scale=1)
                status = gr.Textbox(label="Status", interactive=False, elem_id="status", max_lines=3)
            with gr.Column(scale=2):
                model_dd = gr.Dropdown(list(choices), value=next(iter(choices)),
                                       label="Model pair (target + drafter)", elem_id="model")
                with gr.Group(visible=False) as custom_box:
                    custom_target = gr.Textbox("", label="Target: mlx-lm directory or Hub id",
                                               placeholder="mlx-community/Qwen3-4B-4bit")
                    custom_draft = gr.Textbox("", label="Drafter: directory or Hub id (empty: from the registry)",
                                              placeholder="z-lab/Qwen3-4B-DFlash-b16")
                with gr.Row():
                    max_tokens = gr.Slider(1, MAX_NEW_TOKENS, 128, step=1, label="Max new tokens",
                                           elem_id="max-tokens")
                    block_size = gr.Slider(2, 16, default_block_size(DEFAULT_BLOCK_SIZE), step=1,
                                           label="Block size", elem_id="block-size",
                                           info="≤ the drafter's block; on a CPU 5 is fastest, on a GPU 16")
                with gr.Row():
                    temperature = gr.Slider(0, 2, 0, step=0.05, label="Temperature", info="0 = greedy",
                                            elem_id="temperature")
                    seed = gr.Number(0, label="Seed", precision=0, minimum=0, elem_id="seed")
                chat = gr.Checkbox(True, label="Chat template (wrap the prompt as a user turn)")
                adaptive = gr.Checkbox(False, elem_id="adaptive",
                                       label="Adaptive verify length (≤ block size, from measured costs; "
                                             "plain target steps when drafting does not pay)")
        with gr.Row(equal_height=False):
            target_pane = gr.HTML(pane_html(None, "target"), elem_id="target-pane")
            dflash_pane = gr.HTML(pane_html(None, "dflash"), elem_id="dflash-pane")
        verdict = gr.HTML(verdict_html(None, None), elem_id="verdict")
        with gr.Row(equal_height=False):
            with gr.Column(scale=2):
                metrics = gr.HTML(metrics_html(None, None), elem_id="metrics")
            with gr.Column(scale=3):
                race_plot = gr.Plot(label="Race", elem_id="race-plot", show_label=False)
        with gr.Row():
            cycles_plot = gr.Plot(elem_id="cycles-plot", show_label=False)
            hist_plot = gr.Plot(elem_id="hist-plot", show_label=False)
            pos_plot = gr.Plot(elem_id="pos-plot", show_label=False)
        with gr.Accordion("Raw summaries (JSON, as the engine reported them)", open=False):
            data = gr.JSON(elem_id="data")

        outputs = [status, target_pane, dflash_pane, verdict, metrics, race_plot, cycles_plot, hist_plot,
                   pos_plot, data]
        inputs = [prompt, max_tokens, block_size, temperature, seed, chat, model_dd, custom_target, custom_draft,
                  adaptive]
        run_event = run_btn.click(run, inputs, outputs, api_name="run", concurrency_id="mlx",
                                  concurrency_limit=1, show_progress="minimal")
        stop_btn.click(stop, None, status, cancels=[run_event], api_name="stop", concurrency_limit=None)
        for name, btn in preset_btns.items():
            btn.click(lambda text=presets[name]: text, None, prompt, api_visibility="private", queue=False)
        model_dd.change(lambda c: gr.update(visible=c == CUSTOM), model_dd, custom_box,
                        api_visibility="private", queue=False)
        model_dd.input(choose, model_dd, status, api_name="choose", concurrency_id="mlx", concurrency_limit=1)
    return demo


def _header() -> str:
    return """
<div style="display:flex;align-items:baseline;gap:14px;flex-wrap:wrap">
  <h1 style="margin:0;font-size:26px">DFlash playground</h1>
  <span style="color:var(--body-text-color-subdued)">A small drafter fills a whole block of tokens in one
  pass; the target checks the block in one pass and keeps the prefix it agrees with. Every token is the
  target's own choice, so the output should match the target alone, only sooner.</span>
</div>"""


def serve(demo: gr.Blocks, worker: Worker, args) -> None:
    """Serve the UI, and the OpenAI-compatible API when `dflash/server.py` provides `create_app`."""
    theme = gr.themes.Soft(primary_hue="emerald", secondary_hue="slate")
    demo.queue(default_concurrency_limit=1)
    try:
        from dflash.server import create_app
    except ModuleNotFoundError as e:
        if e.name != "dflash.server":
            raise
        demo.launch(server_name=args.host, server_port=args.port, theme=theme, css=CSS, show_error=True)
        return
    import uvicorn

    app = gr.mount_gradio_app(create_app(worker, args.model, args.draft), demo, path="/", theme=theme, css=CSS)
    url = f"http://{args.host}:{args.port}"
    print(f"* Running on local URL:  {url}  (OpenAI-compatible API: {url}/v1)", flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="DFlash playground: target-only vs DFlash, side by side.")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=7860)
    p.add_argument("--model", default=None, help="target: mlx-lm directory or Hub id (default: embedded SmolLM2)")
    p.add_argument("--draft", default=None, help="drafter: directory or Hub id (default: from the registry)")
    args = p.parse_args(argv)

    worker = Worker()
    print(f"Preparing target {args.model or 'embedded SmolLM2-135M-Instruct'} + drafter "
          f"{args.draft or '(from the registry)'}…", flush=True)
    try:  # the first start converts / downloads; later starts only load
        for item in worker.call(lambda progress: worker.pair(args.model, args.draft, progress) and None):
            if isinstance(item, Status):
                print(f"  {item.message}", flush=True)
    except Exception as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    serve(build_demo(worker, args.model, args.draft), worker, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
