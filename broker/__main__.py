"""``python -m broker server.properties [--override k=v ...]``"""
import sys

from broker.server import main

sys.exit(main())
