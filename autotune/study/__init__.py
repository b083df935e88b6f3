"""Study: the Optuna storage (the only writer), the stored trial records, the study's attributes,
their provenance and the owners of a shared study. What a study found is reporting/'s."""
