"""Args style in the script's own spelling: the default template follows the options the script declares.

argparse takes no spelling for another, so ``--world-size`` stopped a script that declares ``--world_size``
("unrecognized arguments"), and ``--dist-url`` one that takes only ``--world-size`` and ``--rank`` and joins
by ``env://``. core/argsfit.py fits the default template to the script's parser (renamed, or left out, and
said); a template the user typed is theirs.
"""

from __future__ import annotations

import pytest

from ddpstudio.core import protocol
from ddpstudio.core.argsfit import Fitted, fit_template
from ddpstudio.core.plan import DEFAULT_DIST_ARGS, DEFAULT_SPAWN_ARGS
from ddpstudio.core.scriptargs import parse_script
from ddpstudio.core.scriptstyle import read_source, suggest_style
from tests.studio import SCRIPTS, ddpstudio, events, final, of_type

UNDERSCORES = SCRIPTS / "underscore_args.py"
ENV_JOIN = SCRIPTS / "rank_args_env_join.py"
PARSER = "import argparse\np = argparse.ArgumentParser()\n{options}args = p.{parse}()\n"


def fit(template: str, source: str | None) -> Fitted:
    return fit_template(template, parse_script(source))


def parser(*options: str, parse: str = "parse_args", extra: str = "") -> str:
    return PARSER.format(options="".join(f"p.add_argument({o!r})\n" for o in options), parse=parse) + extra


def test_the_default_template_takes_the_scripts_spelling_and_leaves_out_what_it_does_not_take():
    assert fit(DEFAULT_DIST_ARGS, read_source(UNDERSCORES)) == Fitted(
        "--dist_url {url} --dist_backend {backend} --world_size {world_size} --rank {rank}",
        "distributed arguments --dist_url {url} --dist_backend {backend} --world_size {world_size} --rank {rank}: "
        "spelled as the script declares them (--dist_url for --dist-url, --dist_backend for --dist-backend, "
        "--world_size for --world-size)")
    assert fit(DEFAULT_SPAWN_ARGS, read_source(UNDERSCORES)).template == (
        "--dist_url {url} --dist_backend {backend} --world_size 1 --rank 0")
    assert fit(DEFAULT_DIST_ARGS, read_source(ENV_JOIN)) == Fitted(
        "--world-size {world_size} --rank {rank}",
        "distributed arguments --world-size {world_size} --rank {rank}: without --dist-url, --dist-backend, which "
        "the script does not take")
    both = fit(DEFAULT_DIST_ARGS, parser("--world_size", "--rank"))
    assert both.template == "--world_size {world_size} --rank {rank}" and "spelled as" in both.why \
        and "without --dist-url, --dist-backend" in both.why


def test_a_parser_all_in_the_file_that_takes_none_of_the_options_gets_none():
    """A spawn-style script (Lightning's and Fabric's launchers start the other ranks themselves) whose parser,
    all in the file, takes none of the spawn template's options stopped at "unrecognized arguments"."""
    for template in (DEFAULT_DIST_ARGS, DEFAULT_SPAWN_ARGS):
        got = fit(template, parser("--epochs"))
        assert got.template == "" and got.why == ("distributed arguments (none): without --dist-url, --dist-backend, "
                                                  "--world-size, --rank, which the script does not take"), got


def test_the_template_is_left_as_it_is_where_the_script_does_not_show_its_parser():
    unchanged = Fitted(DEFAULT_DIST_ARGS)
    assert fit(DEFAULT_DIST_ARGS, read_source(SCRIPTS / "imagenet_like.py")) == unchanged  # takes all four
    # A parser handed to a function may get the template's options there (a helper module's add_dist_args(p)).
    assert fit(DEFAULT_DIST_ARGS, parser("--epochs").replace("args = ", "add_dist_args(p)\nargs = ")) == unchanged
    assert fit(DEFAULT_DIST_ARGS, parser("--rank", parse="parse_known_args")) == unchanged  # ignores extras
    parents = "import argparse\nbase = make_base()\np = argparse.ArgumentParser(parents=[base])\np.add_argument(" \
              "'--rank')\np.parse_args()\n"
    assert fit(DEFAULT_DIST_ARGS, parents) == unchanged  # the rest may be the parent parser's
    # Options declared from a variable may be the template's (test_clean_e2e.py's job declares --dist-url so):
    # nothing is left out, and the spelling of what it declares literally still counts.
    looped = parser("--world-size", "--rank", extra="").replace(
        "args = ", "for name in ('--dist-url', '--dist-backend'):\n    p.add_argument(name)\nargs = ")
    assert fit(DEFAULT_DIST_ARGS, looped) == unchanged
    assert fit(DEFAULT_DIST_ARGS, looped.replace("'--world-size'", "'--world_size'")).template == (
        "--dist-url {url} --dist-backend {backend} --world_size {world_size} --rank {rank}")
    assert fit(DEFAULT_DIST_ARGS, "def broken(:\n") == unchanged and fit_template(DEFAULT_DIST_ARGS, None) \
        == unchanged


def test_a_script_that_declares_the_options_in_any_spelling_is_args_style_not_torchruns():
    # It joins by env:// (init_process_group without an init_method), but takes its rank as an argument.
    assert suggest_style(read_source(ENV_JOIN)) is None
    assert suggest_style(parser("--world_size", "--rank", extra="import os\nr = os.environ['LOCAL_RANK']\n")) is None


@pytest.mark.slow
@pytest.mark.parametrize("script, words, line", [
    (UNDERSCORES, "spelled as the script declares them", "rank 1 of 2 local 1 backend gloo url file"),
    (ENV_JOIN, "without --dist-url, --dist-backend", "rank 1 step 3 loss 0.3333"),
])
def test_such_a_script_runs_as_written_in_args_style(studio_home, script, words, line):
    res = ddpstudio("run", "--json", "--script", str(script), "--world-size", "2")
    assert res.returncode == 0, res.stderr[-3000:] + res.stdout[-3000:]
    evs = events(res.stdout)
    started = of_type(evs, protocol.RUN_STARTED)[0]
    assert started.get("script_style") == "args"
    assert any(words in reason for reason in started.get("reasons"))
    assert line in [e.get("line") for e in of_type(evs, protocol.LOG)]
    assert final(evs).get("state") == protocol.FINISHED


def test_a_template_the_user_typed_is_kept_and_the_default_one_is_fitted_in_the_plan(studio_home):
    from ddpstudio.core.gpu import detect_inventory
    from ddpstudio.core.plan import ScriptSpec
    from ddpstudio.core.platform import LINUX
    from ddpstudio.core.policy import Request, build_plan

    typed = "--world-size {world_size} --rank {rank} --dist-url {url}"
    plan = lambda template: build_plan(Request(script=ScriptSpec(path=str(ENV_JOIN), dist_args=template)),  # noqa
                                       LINUX, detect_inventory(), interfaces={})
    kept = plan(typed)
    assert kept.script.dist_args == typed and not any("distributed arguments" in r for r in kept.reasons)
    fitted = plan(DEFAULT_DIST_ARGS)
    assert fitted.script.dist_args == "--world-size {world_size} --rank {rank}"
    assert fitted.master_port and any("MASTER_PORT=" in r for r in fitted.reasons)  # it joins by env:// itself
