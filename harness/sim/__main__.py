from harness.sim.main import main

main()
