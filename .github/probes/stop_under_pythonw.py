"""Windows probe (issue 10 §2): run under pythonw.exe, start a real 2-rank run, stop it politely.

Writes a JSON verdict to the path given as argv[1] (pythonw has no console to print to). The
run must end "stopped" with every rank ended by the stop file (KeyboardInterrupt: exit status
0xC000013A), none by the Job Object's hard stop (exit status 1).
"""

import json
import sys
import time
import traceback

out = sys.argv[1]
verdict = {"python": sys.executable}
try:
    from ddpstudio.core import protocol
    from ddpstudio.core.gpu import detect_inventory
    from ddpstudio.core.launch.session import Session, launcher_command
    from ddpstudio.core.plan import RecipeSpec
    from ddpstudio.core.platform import current
    from ddpstudio.core.policy import Request, build_plan

    spec = RecipeSpec(max_steps=100000, batch_size=8, image_size=32)
    plan = build_plan(Request(recipe=spec, world_size=2, backend="gloo"), current(), detect_inventory())
    verdict["launcher"] = launcher_command("plan.json")[0]
    session = Session(plan)
    session.start()
    exits, t_stop = {}, None
    for event in session.events():
        if event.type == protocol.GLOBAL_STEP and t_stop is None:
            t_stop = time.monotonic()
            session.stop()
        elif event.type == protocol.RANK_EXITED:
            exits[event.rank] = event.get("exit_code")
    verdict.update(state=session.state, exits=exits, stop_s=round(time.monotonic() - (t_stop or 0), 1))
    verdict["ok"] = (session.state == "stopped" and len(exits) == 2
                     and all(code == 0xC000013A for code in exits.values()))
except Exception:
    verdict.update(ok=False, error=traceback.format_exc())
with open(out, "w", encoding="utf-8") as fh:
    json.dump(verdict, fh, indent=2)
