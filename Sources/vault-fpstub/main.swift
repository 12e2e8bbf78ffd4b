import FPStubProgram

fpstubMain()
