"""The load sweep: grids and runs (`run`), the adaptive planner, analysis (goodput, crossover), report, plots and
the offline simulator."""
