"""The GPU side: the one place that imports CuPy. The device (the same cubin loaded, the driver's view,
timing) and the runner that checks a kernel on it. Imports only core/.
"""
