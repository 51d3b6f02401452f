print('hello from a file')
