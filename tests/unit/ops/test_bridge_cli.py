"""`credence bridge nominate` refuses while the bridge is off, before it touches any cluster."""

from credence.streams.ops.cli import main as cli


def test_nominate_refuses_with_exit_2_while_the_bridge_is_off(monkeypatch, capsys):
    monkeypatch.setenv("CREDENCE_KAFKA_BOOTSTRAP", "127.0.0.1:1")  # nothing listens: it must not be needed
    monkeypatch.delenv("CREDENCE_BRIDGE__BRIDGE_ENABLED", raising=False)
    assert cli(["bridge", "nominate", "persona-r-1", "--by", "ana"]) == 2
    err = capsys.readouterr().err
    assert "retired" in err and "CREDENCE_BRIDGE__BRIDGE_ENABLED=true" in err


def test_restore_with_a_malformed_scope_is_exit_2(monkeypatch, capsys):
    monkeypatch.setenv("CREDENCE_KAFKA_BOOTSTRAP", "127.0.0.1:1")
    assert cli(["memory", "restore", "p1", "--scope", "acme/u1", "--by", "ops"]) == 2
    assert "tenant/user/character" in capsys.readouterr().err
