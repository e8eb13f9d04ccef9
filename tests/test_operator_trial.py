"""What an operator trial found: each case answers with one sentence, not a traceback."""

import pytest
from click.testing import CliRunner

from bot.cli import main


@pytest.fixture
def invoke():
    runner = CliRunner()

    def invoke(*args, env=None):
        return runner.invoke(main, list(args), env=env)

    return invoke


@pytest.mark.parametrize("tick", ["0", "-5"])
def test_scheduler_tick_must_be_positive(invoke, tick):
    result = invoke("scheduler", "--tick", tick)
    assert result.exit_code == 2, result.output
    assert "--tick" in result.output and "Traceback" not in result.output


@pytest.mark.parametrize("port", ["-1", "70000"])
def test_serve_port_must_be_a_port(invoke, port):
    result = invoke("serve", "--port", port)
    assert result.exit_code == 2, result.output
    assert "--port" in result.output
