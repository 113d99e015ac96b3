"""`bench tune`: the best k from a results file (Leviathan et al. 2023), a check of the model against a k sweep,
profiles to try, and the predicted crossover (is a load sweep worth running?)."""

from __future__ import annotations

import argparse
import math

from bench.arguments import finite_number, whole_number
from bench.commands import deployment
from bench.commands.command import Command
from bench.results import load_results
from config.exit_codes import EXIT_OK


def add_arguments(tune: argparse.ArgumentParser) -> None:
    tune.add_argument("results", nargs="?", help="a results file (not with --propose)")
    tune.add_argument(
        "--propose",
        action="store_true",
        help="print config profiles for k in 1,2,3,5,7 that the stack accepts (swap one in at a time, `make ab`)",
    )
    tune.add_argument("--config", help="deployment config (default config/default.yaml): the k each profile ran")
    tune.add_argument(
        "--cost-ratio",
        type=finite_number(at_least=0),
        help="draft step cost / target step cost for the predictions; default: measured from step times, else 0.05",
    )
    tune.add_argument(
        "--check",
        action="store_true",
        help="a run of profiles that differ only in k: predicted vs measured speedup per k, with the error",
    )
    tune.add_argument(
        "--tolerance",
        type=finite_number(at_least=0),
        help="recommend the smallest k whose predicted speedup is within this fraction of the best (default 0.02)",
    )
    tune.add_argument(
        "--baseline-tpot",
        metavar="LOAD=MS,LOAD=MS",
        help="predict the crossover from RESULTS (acceptance at concurrency 1) and the baseline's p50 TPOT (ms) at "
        "two concurrencies, e.g. 1=45,4=52: is a sweep worth running?",
    )
    tune.add_argument("--max-num-seqs", type=whole_number(1), help="with --baseline-tpot: the grid's batch size")


def baseline_tpot(text: str) -> dict[float, float] | None:
    """--baseline-tpot's LOAD=MS pairs as seconds per token by load; None unless two or more, all finite and above 0
    (float() reads nan, inf and 1e309)."""
    try:
        pairs = [x.partition("=") for x in text.split(",") if x.strip()]
        tpot = {float(load): float(ms) / 1000 for load, _, ms in pairs}
    except ValueError:
        return None
    return tpot if len(tpot) >= 2 and all(math.isfinite(x) and x > 0 for x in (*tpot, *tpot.values())) else None


def problem(args: argparse.Namespace) -> str | None:
    """Every refusal the flags alone decide, before a results file or config is read."""
    if args.tolerance is not None and args.tolerance >= 1.0:
        return f"--tolerance={args.tolerance} must be a fraction below 1, e.g. 0.02 for 2%"
    if args.propose:
        return None
    if not args.results:
        return "tune needs a results file (or --propose)"
    if args.baseline_tpot and baseline_tpot(args.baseline_tpot) is None:
        return (
            f"--baseline-tpot {args.baseline_tpot!r} needs the baseline's p50 TPOT at two concurrencies as LOAD=MS "
            "pairs of finite positive numbers, e.g. 1=45,4=52"
        )
    return None


def execute(args: argparse.Namespace) -> int:
    from bench.tune import DEFAULT_TOLERANCE, fit_cases, format_tuning

    tolerance = DEFAULT_TOLERANCE if args.tolerance is None else args.tolerance
    if args.propose:
        import yaml

        from bench.tune import propose_profiles

        proposals, dropped = propose_profiles(deployment.load(args.config))
        print("# each profile in place of the speculative one (or beside it, with the trn2 capacity for both)")
        print(yaml.safe_dump({"profiles": proposals}, sort_keys=False), end="")
        for reason in dropped:
            print(f"# not proposed: {reason}")
        return EXIT_OK
    results = load_results(args.results)
    cfg = deployment.load(args.config) if any(v.num_speculative_tokens is None for v in results.variants) else None
    if args.baseline_tpot:
        return _predict_crossover(args, results, cfg if cfg is not None else deployment.load(args.config))
    k_by_profile = deployment.k_by_profile(cfg)
    if args.check:
        from bench.tune import check_k_sweep, format_check

        print(format_check(check_k_sweep(results, k_by_profile, args.cost_ratio), tolerance))
        return EXIT_OK
    print(format_tuning(fit_cases(results, k_by_profile, args.cost_ratio), tolerance))
    return EXIT_OK


def _predict_crossover(args: argparse.Namespace, results: object, cfg: object | None) -> int:
    from bench.sweep.run import concurrency_grid
    from bench.tune import format_predictions, predict_crossovers
    from config.profiles import ServingDefaults

    tpot = baseline_tpot(args.baseline_tpot)
    assert tpot is not None, "problem() refuses a malformed --baseline-tpot before execute"
    # --max-num-seqs, else the config's largest batch, else the batch the config gives a profile by default
    mns = args.max_num_seqs or deployment.max_num_seqs(cfg) or ServingDefaults.model_fields["max_num_seqs"].default
    floor = deployment.sweep_policy(cfg)[0]
    grid = [float(c) for c in concurrency_grid(mns) if c <= mns]
    k_by_profile = deployment.k_by_profile(cfg)
    predictions = predict_crossovers(results, k_by_profile, tpot, grid, floor, mns)  # type: ignore[arg-type]
    print(format_predictions(predictions, floor))
    return EXIT_OK


COMMAND = Command(
    "tune", "predict the best k from a results file (Leviathan et al. 2023 model)", add_arguments, execute, problem
)
