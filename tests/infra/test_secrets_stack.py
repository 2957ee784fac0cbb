"""The token key ring in the synthesized template: generated at deploy (no secret value in the template), read
by exactly the functions wiring names, with exactly GetSecretValue on exactly that secret."""

from __future__ import annotations

import pytest

from interlude import wiring
from interlude.adapters.keyring_store import SEED_CHARS, SEED_KEY
from tests.infra.conftest import actions_on, as_list


def secret_id(synth, name: str) -> str:
    return synth.logical_id(synth.interlude.secrets.by_name[name])


def test_the_key_ring_is_generated_at_deploy_and_never_in_the_template(synth):
    # Given wiring.SECRETS / When the secrets in the template are read
    secrets = synth.of_type("AWS::SecretsManager::Secret")
    assert set(secrets) == {secret_id(synth, spec.name) for spec in wiring.SECRETS}
    ring = secrets[secret_id(synth, wiring.KEY_RING_SECRET.name)]
    props = ring["Properties"]
    # Then Secrets Manager generates the seed form the key ring loader reads, and no value is in the template
    assert "SecretString" not in props
    assert props["GenerateSecretString"] == {
        "SecretStringTemplate": "{}",
        "GenerateStringKey": SEED_KEY,
        "PasswordLength": SEED_CHARS,
        "ExcludePunctuation": True,
        "IncludeSpace": False,
    }
    # And the ring outlives the stack (deleting it would orphan every outstanding token)
    assert ring["DeletionPolicy"] == "Retain"


@pytest.mark.parametrize("spec", wiring.FUNCTIONS, ids=lambda spec: spec.name)
def test_only_wirings_readers_get_exactly_get_secret_value_on_exactly_the_ring(synth, spec):
    # Given a function's role / When every statement naming a wiring secret is collected
    statements = synth.statements(spec.name)
    env = synth.env(spec.name)
    for secret in wiring.SECRETS:
        ref = {"Ref": secret_id(synth, secret.name)}
        reads = spec.name in secret.readers
        # Then a reader holds exactly the read actions on exactly that secret's ARN, and nobody else holds any
        assert actions_on(statements, ref) == (set(wiring.SECRET_READ_ACTIONS) if reads else set())
        # And the reader finds the secret through its environment
        assert (env.get(secret.env) == ref) is reads
    # And no statement grants a Secrets Manager action on a wildcard or on another secret of this stack
    ring_refs = [{"Ref": secret_id(synth, s.name)} for s in wiring.SECRETS]
    read_refs = [{"Ref": secret_id(synth, s.name)} for s in wiring.SECRETS if spec.name in s.readers]
    for statement in statements:
        actions = as_list(statement["Action"])
        resources = as_list(statement["Resource"])
        if "secretsmanager:GetSecretValue" in actions and any(r in resources for r in ring_refs):
            # CDK merges statements with the same actions: the secrets the function reads by wiring, and the name
            # prefixes it reads (notify: the tenants' Slack credentials, issue 14).
            readable = {
                f":secret:{synth.interlude.callbacks.secret_prefixes[key]}*"
                for key, granted in spec.secret_grants
                if "secretsmanager:GetSecretValue" in granted
            }
            for resource in resources:
                assert resource in read_refs or resource["Fn::Join"][1][-1] in readable, resource
            assert set(actions) == set(wiring.SECRET_READ_ACTIONS)


def test_the_stack_outputs_the_ring_for_the_cli(synth):
    outputs = synth.template_json["Outputs"]
    assert outputs["KeyRingSecret"]["Value"] == {"Ref": secret_id(synth, wiring.KEY_RING_SECRET.name)}

