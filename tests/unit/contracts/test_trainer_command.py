"""The trainer's command line, built once (contracts/trainer_command.py):
its flags in one order, the ones not given left out, another module for
the all-reduce benchmark."""

from official_bench.contracts.trainer_command import (
    TRAINER_MODULE,
    trainer_argv,
)


def test_flags_in_one_order_and_only_those_given():
    assert trainer_argv("py", mode="train", config_file="c.yaml",
                        model_dir="/m", params_override="a=1",
                        extra=["--data_dir=/d"]) == [
        "py", "-m", "official_bench.classifier_trainer", "--mode=train",
        "--config_file=c.yaml", "--model_dir=/m", "--params_override=a=1",
        "--data_dir=/d"]
    assert trainer_argv("py", model_dir="/m") == [
        "py", "-m", TRAINER_MODULE, "--model_dir=/m"]
    assert trainer_argv("py", extra=("--help",)) == [
        "py", "-m", TRAINER_MODULE, "--help"]


def test_the_allreduce_benchmark_takes_the_same_flags():
    assert trainer_argv("py", config_file="c.yaml", model_dir="/m",
                        module="official_bench.allreduce.bench")[:5] == [
        "py", "-m", "official_bench.allreduce.bench", "--config_file=c.yaml",
        "--model_dir=/m"]
