# tinySSB node: started by MicroPython after boot.py. All logic lives in the tssbfw package.
import tssbfw.app

tssbfw.app.main()
