"""Dynamo's recompile reasons in the user's terms (provenance/thunder/dynamo_reasons.py): a guard's subject
whole, an attribute Dynamo read past a custom __getattr__ named as the user wrote it, and a change of global
state (grad mode, say: every Hugging Face eval under no_grad recompiles on it) as before → after."""

from __future__ import annotations

import torch

from provenance.thunder import dynamo_reasons


def test_a_guard_on_an_attribute_past_getattr_is_named_whole():
    (found,) = dynamo_reasons.failures(["0/0: object.__getattribute__(L['self'].config, 'output_attentions') == False"])
    assert found["subject"] == "self.config.output_attentions"
    assert found["reason"] == "self.config.output_attentions: guard self.config.output_attentions == False failed"


def test_a_call_in_a_guard_is_its_subject_whole():
    (found,) = dynamo_reasons.failures(["0/0: len(L['xs'], 'a b') == 3"])
    assert found["subject"] == "len(xs, 'a b')"


def test_grad_mode_changed_reads_before_and_after():
    with torch.no_grad():  # what an eval does: the entry was compiled with grad on
        (found,) = dynamo_reasons.failures(["0/0: GLOBAL_STATE changed: grad_mode "])
    assert (found["reason"], found["changes"]) == ("grad mode: on \u2192 off", [["grad mode", "on", "off"]])
    (found,) = dynamo_reasons.failures(["0/0: GLOBAL_STATE changed: grad_mode num_threads "])
    assert found["reason"] == f"grad mode: off \u2192 on, threads (now {torch.get_num_threads()})"
    assert found["guard"] == "GLOBAL_STATE changed: grad_mode num_threads"


def test_a_python_guard_says_where_torch_made_it_without_its_comments():
    torch_says = ("0/0: self.config.problem_type is None  # if config.problem_type is None:  "
                  "# transformers/loss/loss_utils.py:92 in ForSequenceClassificationLoss")
    (found,) = dynamo_reasons.failures([torch_says])
    assert found["reason"] == ("self.config.problem_type: guard self.config.problem_type is None failed "
                               "(at loss_utils.py:92)")
    assert found["guard"] == torch_says.removeprefix("0/0: ")
