# A first cell: output streams as it is printed, and the last expression is the result.
import platform, os, socket
print("hello from", socket.gethostname(), "as uid", os.getuid(), "in", os.getcwd())
print("python", platform.python_version())
sum(i * i for i in range(10))
