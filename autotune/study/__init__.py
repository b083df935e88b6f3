"""Study: the Optuna storage (the only writer), the stored trial records, their provenance and
quality evidence, and the report of what a study found."""
