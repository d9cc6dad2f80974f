"""What a task type is made of, and where sas finds them: the declarations (steps, waits,
parallel groups, conditions, services, calls declared as data) and their discovery.

Light on purpose: a task type's module imports these inside the workflow sandbox. Teams use
them through ``sas.api``.
"""
