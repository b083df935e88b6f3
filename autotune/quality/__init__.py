"""The accuracy side of a search: does a configuration train as well as the default launch?

- math_class.py   which configurations train alike (the batch and learning-rate arithmetic, and
                  how long a quality run trains, are autotune/training.py's, on the ground floor)
- evidence.py     the seeded quality runs per math class, stored on the study (QualityBook); the
                  default launch's class is the noise floor
- script_floor.py the noise floor of a user's script (its reported accuracy over seeds)
- gate.py         the paired one-sided test of a class's drop, its failed and worst seeds (pure)
- looks.py        the one verdict every reader reaches from a class's stored runs, and the
                  looks of new seeds that decide it (one error rate per study)
- verdict.py      QualityVerdict, the typed answer the search, the recommender and the report use
- confirm.py      the seeded confirmation of a recommendation that changes the math
- goodput.py      gradient noise scale, goodput, time to accuracy (pure arithmetic)

Callers import the module they need (autotune.quality.gate, ...): this package re-exports nothing.
"""
