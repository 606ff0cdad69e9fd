"""The site's generated reference pages: every key, flag, metric and API is there, and described."""

import argparse

import pytest

from strom.docs import reference
from strom.storage.log_config import TOPIC_KEYS


def test_every_broker_config_key_has_a_description():
    docs = reference.broker_config_docs()
    assert len(docs) > 100
    undescribed = sorted(key for key, doc in docs.items() if not (doc or "").strip())
    assert undescribed == [], f"broker keys without a doc in BrokerConfig: {undescribed}"


def test_every_topic_config_key_has_a_meaning_and_says_what_strom_does():
    docs = reference.topic_config_docs()
    assert set(docs) == set(TOPIC_KEYS)
    undescribed = sorted(key for key, (meaning, effect) in docs.items() if not meaning.strip() and not effect.strip())
    assert undescribed == [], f"topic keys without a description: {undescribed}"
    assert all(effect.strip() for _, effect in docs.values())


def test_the_config_pages_list_every_key_with_its_type_and_default():
    broker = reference.broker_configs_page()
    for key in reference.broker_config_docs():
        assert f'<a id="{key}"></a>`{key}`' in broker
    assert "| `log.segment.bytes` | int | `1073741824` |" in broker.replace('<a id="log.segment.bytes"></a>', "")
    topics = reference.topic_configs_page()
    for key in TOPIC_KEYS:
        assert f'| <a id="{key}"></a>`{key}` |' in topics
    assert '| <a id="cleanup.policy"></a>`cleanup.policy` | list | `delete` |' in topics


def _parsers(parser, path):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, f"{path} {name}")


def test_the_cli_page_has_every_command_and_flag():
    from strom.cli.main import SUBCOMMANDS, build_parser

    page = reference.cli_page()
    for name in SUBCOMMANDS:
        assert f"## strom {name} {{#strom-{name}}}" in page
    flags = 0
    for path, parser in _parsers(build_parser(), "strom"):
        if path != "strom":
            assert f" {path} {{#" in page, path
        for action in parser._actions:
            if action.help == argparse.SUPPRESS or isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
                continue
            for flag in action.option_strings:
                assert f"`{flag}" in page, f"{path} {flag}"
                flags += 1
    assert flags > 200


def test_every_metric_family_is_documented():
    families = reference.metric_families()
    names = {name for name, *_ in families}
    assert {"kafka_server_brokertopicmetrics_messagesin", "kafka_network_requestmetrics_totaltimems"} <= names
    assert [name for name, _, documentation, _ in families if not documentation.strip()] == []
    page = reference.metrics_page()
    assert "- **`kafka_server_brokertopicmetrics_messagesin_total`** (counter, labels `topic`): " in page


def test_the_api_page_lists_every_handler_with_its_versions():
    from strom.server.handlers import HANDLERS

    page = reference.apis_page()
    for spec in HANDLERS.values():
        assert f"| {spec.api_key} | {spec.min_version}–{spec.max_version} |" in page
    assert (
        "| [Produce](modules/server.md#strom.server.handlers.produce) | 0 |" in page
        and "Served, not advertised in ApiVersions" in page
    )


def test_module_links_resolve_and_unknown_modules_are_refused():
    assert reference.module_link("strom.storage.segment", "concepts/acks.md") == (
        "../reference/modules/storage.md#strom.storage.segment"
    )
    assert reference.module_link("strom.clock", "index.md") == "reference/modules/strom.md#strom.clock"
    with pytest.raises(KeyError):
        reference.module_link("strom.storage.no_such_module", "index.md")


def test_every_generated_page_renders():
    for path, make in reference.pages().items():
        text = make()
        assert text.startswith("# "), path
        assert "Generated" in text, path
