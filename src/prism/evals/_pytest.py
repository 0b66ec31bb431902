"""A dataset as parametrized pytest cases.

::

    DATASET = load_dataset("evals/refunds.yaml")

    @pytest.mark.parametrize("case", pytest_cases(DATASET))
    async def test_refunds(case: Case) -> None:
        (await run_case(build_agent(), case)).assert_passed()

Each case becomes one test, named after it, carrying its dataset's evaluators; a failing test
fails with the evaluators' reasons (``CaseReport.assert_passed``). No pytest plugin is registered:
pytest is imported only when [`pytest_cases()`][prism.evals._pytest.pytest_cases] is called.
"""

from __future__ import annotations

from collections.abc import Sequence

from prism.evals._model import Dataset
from prism.evals._runner import fold_case

__all__ = ["pytest_cases"]


def pytest_cases(dataset: Dataset, *, marks: Sequence[object] = ()) -> list[object]:
    """The cases of ``dataset`` as ``pytest.param`` values for ``@pytest.mark.parametrize``.

    Each value is the [`Case`][prism.evals.Case] with the dataset's evaluators folded in (so
    ``run_case(agent, case)`` evaluates it as ``run_eval`` would), and its id is the case's name.

    Args:
        dataset: The dataset.
        marks: pytest marks for every case (e.g. ``pytest.mark.local_model``).

    Raises:
        ImportError: pytest is not installed.
    """
    import pytest

    return [
        pytest.param(fold_case(dataset, case), id=case.name, marks=tuple(marks))  # type: ignore[arg-type]
        for case in dataset.cases
    ]
